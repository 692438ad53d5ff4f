"""Shared fixtures: test data, the optional development corpus, and one real engine per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

DATA = Path(__file__).parent / "data"


SHIPPED_CORPUS = DATA / "corpus"


def corpus_root() -> Path:
    """The development corpus the tests score: ``$VOXSERVE_CORPUS`` when set, else the copy shipped in
    ``tests/data/corpus`` (so a user's clone runs the same quality checks as the developers' machines)."""
    override = os.environ.get("VOXSERVE_CORPUS")
    return Path(override) if override else SHIPPED_CORPUS


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def corpus() -> Path:
    root = corpus_root()
    if not root.is_dir():
        raise FileNotFoundError(f"VOXSERVE_CORPUS={root} is not a directory")
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


def embedded_llm_problem() -> str | None:
    """Why the embedded LLM cannot run here (not installed, or a llama-cpp-python build this CPU cannot
    execute: voxserve refuses to load it rather than die of SIGILL), or None when it can."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return "needs voxserve[agent]"
    from voxserve.backends.asr.embedded import cache_dir
    from voxserve.backends.llm.llama_cpp import check_runtime, smollm2_path
    from voxserve.errors import ModelUnavailable

    try:
        check_runtime(smollm2_path(), cache_dir())
    except ModelUnavailable as exc:
        return exc.message
    return None


def require_embedded_llm() -> None:
    """Skip (with the reason) where the embedded LLM cannot run (see :func:`embedded_llm_problem`)."""
    problem = embedded_llm_problem()
    if problem is not None:
        pytest.skip(problem)


@pytest.fixture(scope="session")
def embedded_llm() -> None:
    """For tests that need the embedded LLM to run (see :func:`require_embedded_llm`)."""
    require_embedded_llm()
