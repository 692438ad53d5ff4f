"""The ``[ray]`` settings and command-line options map to Ray actor options (no Ray needed)."""

from __future__ import annotations

import pytest

from voxserve.cli import build_parser
from voxserve.cli.common import ray_overrides
from voxserve.config import AsrConfig, RayConfig, load_settings
from voxserve.distributed.cluster import actor_options, replica_spec
from voxserve.errors import InvalidInput


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["serve"], {}),
        (["serve", "--ray"], {"enabled": True}),
        (["serve", "--ray", "auto"], {"enabled": True, "address": "auto"}),
        (["serve", "--ray", "ray://head:10001", "--replicas", "8"],
         {"enabled": True, "address": "ray://head:10001", "replicas": 8}),
        (["transcribe", "x.flac", "--replicas", "3"], {"enabled": True, "replicas": 3}),
    ],
)
def test_command_line_options(argv: list[str], expected: dict[str, object]) -> None:
    assert ray_overrides(build_parser().parse_args(argv)) == expected


def test_bad_replica_count_is_refused() -> None:
    with pytest.raises(InvalidInput):
        ray_overrides(build_parser().parse_args(["serve", "--replicas", "0"]))


def test_environment_reaches_the_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXSERVE_RAY__REPLICAS", "4")
    monkeypatch.setenv("VOXSERVE_RAY__RESOURCES", '{"mig_1g": 1}')
    ray = load_settings(ray={"enabled": True}).ray
    assert (ray.enabled, ray.replicas, ray.resources) == (True, 4, {"mig_1g": 1.0})
    assert load_settings().ray.enabled is False  # off unless asked for


def test_actor_options_carry_the_resources() -> None:
    options = actor_options(RayConfig(cpus_per_replica=2, gpus_per_replica=0.25, resources={"mig_1g": 1},
                                      max_restarts=-1))
    assert options == {"num_cpus": 2.0, "num_gpus": 0.25, "resources": {"mig_1g": 1.0}, "max_restarts": -1,
                       "max_task_retries": 0, "max_concurrency": 1000}
    assert "num_gpus" not in actor_options(RayConfig())
    with pytest.raises(InvalidInput):
        actor_options(RayConfig(gpus_per_replica=1.5))


def test_replica_spec_takes_batching_from_asr_and_threads_from_ray() -> None:
    spec = replica_spec("whisper-base", AsrConfig(max_batch_size=16, compute_type="int8", workers=8),
                        RayConfig(workers_per_replica=2, threads_per_worker=3))
    assert (spec.load.workers, spec.load.threads_per_worker, spec.load.compute_type) == (2, 3, "int8")
    assert (spec.batcher.max_batch_size, spec.batcher.workers) == (16, 2)
    with pytest.raises(InvalidInput, match="asr.device"):
        replica_spec("whisper-base", AsrConfig(device="cpu"), RayConfig(gpus_per_replica=1))
    assert replica_spec("m", AsrConfig(device="auto"), RayConfig(gpus_per_replica=1)).load.device == "auto"
