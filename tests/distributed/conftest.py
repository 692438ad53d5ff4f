"""One real local Ray instance for the whole test session (an idle head is ~1.6 GB in ~20 processes, so it is
started once), on loopback addresses only, with custom resources standing in for GPUs and MIG slices."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

FAKE_GPUS = 2
"""GPUs the test instance declares (there are none: only fake models ask for them)."""
MIG_SLICES = 7
"""Units of the custom resource ``mig_1g`` (one GPU cut in seven, as on an H100/H200)."""


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # bind 127.0.0.1, not the outward address
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    if ray.is_initialized():
        yield ray
        return
    ray.init(
        num_cpus=4, num_gpus=FAKE_GPUS, resources={"mig_1g": MIG_SLICES, "fake_gpu": FAKE_GPUS},
        _node_ip_address="127.0.0.1", include_dashboard=False, namespace="voxserve-tests",
        logging_level="warning", object_store_memory=200 * 1024 * 1024,
    )
    yield ray
    ray.shutdown()
