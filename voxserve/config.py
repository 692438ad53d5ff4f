"""Process configuration: one frozen, validated settings object, nested per component.

Values come from (highest first) explicit arguments, environment variables (``VOXSERVE_`` prefix, ``__``
between levels, e.g. ``VOXSERVE_ASR__MAX_BATCH_SIZE=16``), a TOML or JSON file (``--config FILE``), and the
defaults below.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from voxserve.errors import InvalidInput


def _default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AsrConfig(_Frozen):
    """Speech recognition engine settings."""

    model: str = Field("whisper-base", description="Default model: a registered name or a directory path.")
    device: str = Field("cpu", description="cpu, cuda or auto.")
    compute_type: str = Field("default", description="CTranslate2 compute type; default = int8 on CPU.")
    workers: int = Field(default_factory=_default_workers, ge=1, description="Concurrent model batches.")
    threads_per_worker: int = Field(1, ge=1, description="Threads inside one model batch.")
    max_batch_size: int = Field(8, ge=1, le=256, description="Chunks per decoder batch.")
    max_wait_ms: float = Field(10.0, ge=0, description="How long a batch with live or agent work waits to fill.")
    offline_wait_ms: float = Field(100.0, ge=0, description="How long a batch of offline work waits to fill.")
    max_queue: int = Field(4096, ge=1, description="Queued chunks beyond which new work is refused.")
    beam_size: int = Field(1, ge=1, le=16, description="Beam width at temperature 0 (1 = greedy).")
    best_of: int = Field(3, ge=1, le=16, description="Samples per retry at temperature above 0.")


class GuardSettings(_Frozen):
    """Hallucination guard thresholds (see ``voxserve.pipelines.guard``)."""

    enabled: bool = True
    max_compression_ratio: float = 2.4
    min_avg_logprob: float = -1.0
    no_speech_threshold: float = 0.6
    max_words_per_minute: float = 380.0
    min_words_per_minute: float = 12.0
    temperatures: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    rechunk: bool = True


class ChunkSettings(_Frozen):
    """Long-file chunking."""

    max_chunk_s: float = Field(29.0, gt=1.0, le=30.0)
    fit_below_s: float = Field(
        20.0, ge=0.0, le=30.0, description="Chunks shorter than this use a fitted encoder window (0 = always 30 s)."
    )
    vad_threshold: float = Field(
        0.3, gt=0.0, lt=1.0, description="Offline favours recall: Whisper and the guard reject non-speech."
    )
    min_silence_ms: int = Field(300, ge=0)
    speech_pad_ms: int = Field(200, ge=0)


class ServerConfig(_Frozen):
    """HTTP/WebSocket server settings."""

    host: str = Field("127.0.0.1", description="Bind address; binding a public one without api_keys logs a warning.")
    port: int = Field(8000, ge=0, le=65535)
    api_keys: tuple[str, ...] = Field((), description="Accepted bearer tokens; empty = no authentication.")
    max_upload_mb: float = Field(200.0, gt=0, description="Largest accepted request body.")
    max_audio_s: float = Field(4 * 3600.0, gt=0, description="Longest accepted audio.")
    max_sync_audio_s: float = Field(3600.0, gt=0, description="Longest audio for a synchronous request; use jobs beyond.")
    max_concurrent_per_key: int = Field(8, ge=1, description="Concurrent requests per API key (or client address).")
    max_inflight: int = Field(64, ge=1, description="Transcriptions in progress before new ones get 503.")
    data_dir: str = Field("", description="Folder for the job database and uploads (default: ~/.local/share/voxserve).")
    job_workers: int = Field(2, ge=1, description="Jobs transcribed at the same time.")
    cors_origins: tuple[str, ...] = Field((), description="Origins allowed by CORS; empty = CORS off.")
    warmup: bool = Field(True, description="Run the default model once at start so the first request is fast.")


class Settings(BaseSettings):
    """All voxserve settings."""

    model_config = SettingsConfigDict(env_prefix="VOXSERVE_", env_nested_delimiter="__", frozen=True, extra="forbid")

    asr: AsrConfig = Field(default_factory=AsrConfig)
    guard: GuardSettings = Field(default_factory=GuardSettings)
    chunking: ChunkSettings = Field(default_factory=ChunkSettings)
    server: ServerConfig = Field(default_factory=ServerConfig)


def load_settings(path: str | Path | None = None, **overrides: dict[str, Any]) -> Settings:
    """Build settings: explicit ``overrides`` (per section) > environment > the TOML/JSON file > defaults."""
    file_data = _read_file(Path(path)) if path is not None else {}
    init = {section: {k: v for k, v in values.items() if v is not None} for section, values in overrides.items()}

    class _Layered(Settings):
        @classmethod
        def settings_customise_sources(
            cls, settings_cls: Any, init_settings: Any, env_settings: Any, dotenv_settings: Any, file_secret_settings: Any
        ) -> Any:
            return (init_settings, env_settings, lambda: file_data)

    try:
        layered = _Layered(**{k: v for k, v in init.items() if v})  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidInput(f"invalid configuration: {exc}") from exc
    return Settings.model_construct(**{name: getattr(layered, name) for name in Settings.model_fields})


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InvalidInput(f"config file {path} does not exist")
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"config file {path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"config file {path} must hold a table of settings")
    return data
