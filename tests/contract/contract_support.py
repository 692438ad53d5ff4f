"""Helpers of the contract suites (fixtures are in this folder's conftest). Imported as a sibling module
(``from contract_support import ...``), so the tier runs under ``pytest`` as well as ``python -m pytest``."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TypeVar

import pytest

from voxserve.errors import ModelUnavailable
from voxserve.types import SAMPLE_RATE

T = TypeVar("T")


def require_modules(extra: str, *modules: str) -> None:
    """Skip (naming the extra) unless every module can be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs voxserve[{extra}] ({', '.join(missing)} not installed)")


def load_or_skip(load: Callable[[], T]) -> T:
    """The loaded model, or a skip with the reason it is unavailable."""
    try:
        return load()
    except ModelUnavailable as exc:
        pytest.skip(exc.message)


def seconds(n: float) -> int:
    """Samples in ``n`` seconds at 16 kHz."""
    return int(n * SAMPLE_RATE)
