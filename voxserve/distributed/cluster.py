"""Starting model replicas on Ray: joining or starting a cluster, mapping settings to Ray resources, and
:class:`ReplicaPool`, the Ray twin of :class:`~voxserve.engine.pool.ModelPool`.

Placement is Ray's: each replica actor reserves ``cpus_per_replica`` CPUs, ``gpus_per_replica`` GPUs (a
fraction packs several replicas on one GPU; Ray then sets ``CUDA_VISIBLE_DEVICES`` so the model's device 0
is the granted GPU) and any custom resources (``{"mig_1g": 1}`` for a node started with
``ray start --resources '{"mig_1g": 7}'``, say). Ray restarts a crashed replica up to ``max_restarts`` times;
requests never wait for that: the router retries them on another replica at once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from voxserve.backends.base import AsrLoadOptions, AsrModel
from voxserve.config import AsrConfig, RayConfig
from voxserve.distributed.replica import AsrReplica, ReplicaInfo, ReplicaSpec
from voxserve.distributed.router import RayRecognizer, ReplicaObserver
from voxserve.engine.batcher import BatcherConfig
from voxserve.errors import InvalidInput, ModelUnavailable

log = logging.getLogger(__name__)


def require_ray() -> Any:
    """The ``ray`` module, or :class:`ModelUnavailable` saying how to install it."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise ModelUnavailable("Ray is not installed: pip install 'voxserve[ray]'") from exc
    return ray


def connect(config: RayConfig) -> bool:
    """Initialise Ray in this process (unless it already is); returns whether this call did.

    With no address, a private instance starts on this machine with loopback addresses only (Ray would
    otherwise pick, and listen on, the machine's outward address); set ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1``
    before starting to allow other machines to join it.
    """
    if not config.address:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when ray is first imported
    ray = require_ray()
    if ray.is_initialized():
        return False
    common: dict[str, Any] = {"include_dashboard": False, "namespace": config.namespace, "logging_level": "warning"}
    if config.address:
        ray.init(address=config.address, **common)
    else:
        ray.init(address="local", num_cpus=config.num_cpus, _node_ip_address="127.0.0.1", **common)
    return True


def actor_options(config: RayConfig) -> dict[str, Any]:
    """The Ray options of one replica actor: its resources, restarts and concurrency."""
    gpus = config.gpus_per_replica
    if gpus > 1 and gpus != int(gpus):
        raise InvalidInput("ray.gpus_per_replica above 1 must be a whole number", param="gpus_per_replica")
    options: dict[str, Any] = {
        "num_cpus": config.cpus_per_replica,
        "max_restarts": config.max_restarts,
        "max_task_retries": 0,  # the router retries on another replica instead of waiting for a restart
        "max_concurrency": 1000,  # async actor: requests wait on the in-replica batcher concurrently
    }
    if gpus:
        options["num_gpus"] = gpus
    if config.resources:
        options["resources"] = dict(config.resources)
    return options


def replica_spec(
    model: str, asr: AsrConfig, config: RayConfig, factory: Callable[[], AsrModel] | None = None
) -> ReplicaSpec:
    """What each replica of ``model`` loads: the engine's ASR settings with the per-replica workers and threads."""
    if config.gpus_per_replica and asr.device == "cpu":
        raise InvalidInput("ray.gpus_per_replica needs asr.device cuda or auto", param="device")
    return ReplicaSpec(
        model=model,
        load=AsrLoadOptions.from_settings(asr, workers=config.workers_per_replica,
                                          threads_per_worker=config.threads_per_worker),
        batcher=BatcherConfig.from_settings(asr, workers=config.workers_per_replica),
        factory=factory,
    )


class ReplicaPool:
    """Replicas of each model on Ray, started on first use and kept for the life of the process."""

    def __init__(
        self,
        asr: AsrConfig,
        config: RayConfig,
        observer: object | None = None,
        *,
        factory: Callable[[], AsrModel] | None = None,
    ) -> None:
        """``factory`` builds every replica's model instead of the registry (tests, custom backends)."""
        self.asr_config = asr
        self.config = config
        self._observer = observer if isinstance(observer, ReplicaObserver) else None
        self._factory = factory
        self._started_ray = connect(config)
        self._services: dict[str, RayRecognizer] = {}
        self._handles: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    def asr(self, name: str | None = None) -> RayRecognizer:
        """The replicas of a model (default: the configured one), started and warmed up on first use."""
        key = name or self.asr_config.model
        with self._lock:
            service = self._services.get(key)
            if service is None:
                service = self._start(key)
                self._services[key] = service
        return service

    def loaded(self) -> list[str]:
        """Names of the models with replicas."""
        with self._lock:
            return list(self._services)

    def close(self) -> None:
        """Stop every replica (and the private Ray instance this pool started)."""
        ray = require_ray()
        with self._lock:
            services, handles = list(self._services.values()), [h for hs in self._handles.values() for h in hs]
            self._services.clear()
            self._handles.clear()
        for service in services:
            service.close()
        for handle in handles:
            _kill(ray, handle)
        if self._started_ray and ray.is_initialized():
            ray.shutdown()

    # ---------------------------------------------------------------------------------------- start

    def _start(self, model: str) -> RayRecognizer:
        ray = require_ray()
        c = self.config
        options = actor_options(c)
        spec = replica_spec(model, self.asr_config, c, self._factory)
        self._check_feasible(ray, options)
        remote = ray.remote(AsrReplica)
        handles = [remote.options(**options).remote(spec) for _ in range(c.replicas)]
        try:
            infos: list[ReplicaInfo] = ray.get([h.describe.remote() for h in handles], timeout=c.start_timeout_s)
            ray.get([h.warm_up.remote() for h in handles], timeout=c.start_timeout_s)
        except Exception as exc:
            for h in handles:
                _kill(ray, h)
            raise self._start_error(ray, model, options, exc) from exc
        names = [f"{infos[0].model.name}#{i}" for i in range(len(handles))]
        self._handles[model] = handles
        for name, info in zip(names, infos, strict=True):
            log.info("replica %s up: pid %d, %s, resources %s", name, info.pid, info.device, info.resources)
            if self._observer is not None:
                self._observer.on_replica_event(info.model.name, name, "started")
        return RayRecognizer(
            list(zip(names, handles, infos, strict=True)), slots=c.max_inflight_per_replica,
            max_attempts=c.max_attempts, observer=self._observer,
        )

    def _check_feasible(self, ray: Any, options: dict[str, Any]) -> None:
        """Fail at once when a private instance can never hold the replicas (a cluster may still grow)."""
        if self.config.address:
            return
        need = _needs(options, self.config.replicas)
        have = ray.cluster_resources()
        short = {k: v for k, v in need.items() if have.get(k, 0.0) + 1e-9 < v}
        if short:
            raise ModelUnavailable(
                f"{self.config.replicas} replicas need {_fmt(need)} but this Ray instance has {_fmt(have, need)}"
            )

    def _start_error(self, ray: Any, model: str, options: dict[str, Any], exc: BaseException) -> ModelUnavailable:
        if isinstance(exc, ray.exceptions.GetTimeoutError):
            return ModelUnavailable(
                f"{self.config.replicas} replicas of {model} were not up within {self.config.start_timeout_s:.0f} s: "
                f"each needs {_fmt(_needs(options, 1))}; the cluster has {_fmt(ray.available_resources())} free"
            )
        lines = [line for line in str(exc).splitlines() if line.strip()]
        reason = next((line.strip() for line in reversed(lines) if "Error" in line), lines[-1] if lines else repr(exc))
        return ModelUnavailable(f"a replica of {model} failed to start: {reason}")


def _needs(options: dict[str, Any], replicas: int) -> dict[str, float]:
    need = {"CPU": float(options.get("num_cpus", 1)) * replicas}
    if options.get("num_gpus"):
        need["GPU"] = float(options["num_gpus"]) * replicas
    for key, value in options.get("resources", {}).items():
        need[key] = float(value) * replicas
    return {k: v for k, v in need.items() if v > 0}


def _fmt(resources: dict[str, float], only: dict[str, float] | None = None) -> str:
    keys = list(only) if only is not None else sorted(k for k in resources if not k.startswith(("node:", "memory", "object")))
    return ", ".join(f"{k}={resources.get(k, 0.0):g}" for k in keys) or "nothing"


def _kill(ray: Any, handle: Any) -> None:
    try:
        ray.kill(handle)
    except Exception:  # noqa: BLE001 - already gone
        pass
