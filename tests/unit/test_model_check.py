"""The front door checks a speech model's name without loading it (the CLI loads the model while the first
file's speech is being found, and still refuses an unknown model before any file is read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxserve.errors import ModelUnavailable
from voxserve.service import Voxserve


def test_a_model_is_checked_without_being_loaded(tmp_path: Path) -> None:
    vox = Voxserve()
    try:
        vox.check_model()  # the embedded default
        vox.check_model("whisper-base")
        vox.check_model(str(tmp_path))  # a local directory is taken as given; its load says what is wrong with it
        assert vox.pool.loaded() == []
        with pytest.raises(ModelUnavailable) as err:
            vox.check_model("nope")
        assert err.value.param == "model" and "whisper-base" in str(err.value)
    finally:
        vox.close()
