"""The README's examples run as written: every fenced block marked ``<!-- readme: run -->`` is executed,
shell blocks with bash (a leading ``pip install ... &&`` is the install this test environment already did)
and Python blocks with this interpreter, from a scratch folder that sees the clone's ``tests/`` like the
clone's root does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quality import jfk_wer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- readme: run -->"
BLOCK = re.compile(re.escape(MARK) + r"\s*```(bash|python)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    found = BLOCK.findall((ROOT / "README.md").read_text())
    assert len(found) >= 5, "the README lost its runnable examples"
    return found


def _installed(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


@pytest.mark.parametrize(("lang", "code"), blocks(), ids=lambda v: v.split("\n")[0][:40] if "\n" in v else v)
def test_readme_block_runs(lang: str, code: str, tmp_path: Path) -> None:
    if ("speak" in code or "tts" in code) and not _installed("piper"):
        pytest.skip("needs voxserve[tts]")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if lang == "bash":
        script = re.sub(r"^pip install [^&\n]*&&\s*", "", code, flags=re.M)
        cmd = ["bash", "-euo", "pipefail", "-c", script]
    else:
        cmd = [sys.executable, "-c", code]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (code, r.stdout[-2000:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr
    if "fw_jfk" in code and "vox.live" in code:  # prints each utterance's text
        assert jfk_wer(" ".join(r.stdout.splitlines())) <= 0.1, r.stdout
    elif "fw_jfk" in code and lang == "python":  # prints the text, then the RTFx, then one word per line
        assert jfk_wer(r.stdout.splitlines()[0].rsplit(" ", 1)[0]) <= 0.1, r.stdout
