"""Shared fixtures: test data, the optional development corpus, and one real engine per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

DATA = Path(__file__).parent / "data"


def corpus_root() -> Path | None:
    """``../shared/corpus`` beside the checkout, or ``$VOXSERVE_CORPUS``, when present."""
    candidates = [os.environ.get("VOXSERVE_CORPUS"), Path(__file__).resolve().parents[2] / "shared" / "corpus"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def corpus() -> Path:
    root = corpus_root()
    if root is None:
        pytest.skip("the development corpus (../shared/corpus) is not available")
    return root


@pytest.fixture(scope="session")
def vox() -> Iterator[object]:
    """One real engine (embedded whisper-base, default settings) shared by the integration tests."""
    from voxserve.config import load_settings
    from voxserve.service import Voxserve

    engine = Voxserve(load_settings())
    engine.asr()
    yield engine
    engine.close()
