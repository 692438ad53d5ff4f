"""Capability protocols that every backend implements, with their request and result types.

A backend wraps one runtime (CTranslate2, ONNX Runtime, ...) behind one of these protocols. Backends are
synchronous and blocking: the engine runs them in its worker threads, never on an event loop. They know
nothing about HTTP, queues or asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from voxserve.errors import InvalidInput
from voxserve.types import Float32Array, Task


@dataclass(frozen=True)
class DecodeOptions:
    """Per-request decoding options of a speech recogniser.

    Attributes:
        language: ISO 639-1 code, or None to detect it from the audio.
        task: ``transcribe`` or ``translate`` (to English).
        prompt: text that conditions the decoder (previous text, vocabulary hints); trimmed to fit.
        temperature: 0 decodes greedily or with beam search; above 0 samples.
        beam_size: beam width at temperature 0 (1 = greedy).
        best_of: number of samples drawn at temperature above 0; the most likely one is kept.
        word_timestamps: align every word to the audio.
        max_new_tokens: cap on generated tokens (None = the model's maximum).
        window: ``full`` pads every input to the model's 30 s window; ``fit`` encodes a window at least
            1 s longer than the audio, rounded up to ``fit_step_s`` (inputs with equal windows batch
            together). On the corpus's short clips, fitted windows (5 s steps) were 2.8x faster at equal
            or better WER; Whisper loops more often in them, which the hallucination guard catches.
        fit_step_s: granularity of fitted windows (small for latency, larger for batching).
    """

    language: str | None = None
    task: Task = "transcribe"
    prompt: str | None = None
    temperature: float = 0.0
    beam_size: int = 1
    best_of: int = 1
    word_timestamps: bool = True
    max_new_tokens: int | None = None
    window: str = "full"
    fit_step_s: float = 5.0

    def validate(self) -> None:
        """Raise :class:`InvalidInput` when the options contradict each other or are out of range."""
        if self.task not in ("transcribe", "translate"):
            raise InvalidInput(f"task must be 'transcribe' or 'translate', not {self.task!r}", param="task")
        if not 0.0 <= self.temperature <= 1.0:
            raise InvalidInput("temperature must be between 0 and 1", param="temperature")
        if self.beam_size < 1 or self.best_of < 1:
            raise InvalidInput("beam_size and best_of must be at least 1", param="beam_size")
        if self.window not in ("full", "fit"):
            raise InvalidInput(f"window must be 'full' or 'fit', not {self.window!r}", param="window")
        if not 0.1 <= self.fit_step_s <= 30:
            raise InvalidInput("fit_step_s must be between 0.1 and 30 s", param="fit_step_s")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise InvalidInput("max_new_tokens must be at least 1", param="max_new_tokens")


@dataclass(frozen=True, eq=False)
class AsrRequest:
    """One piece of audio (at most the model's window, 16 kHz mono float32) to recognise."""

    audio: Float32Array
    options: DecodeOptions = field(default_factory=DecodeOptions)


@dataclass(frozen=True)
class TimedWord:
    """A word with times in samples relative to the start of its request's audio."""

    text: str
    start: int
    end: int
    probability: float
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class AsrResult:
    """The recogniser's output for one :class:`AsrRequest`.

    ``avg_logprob`` is the mean token log-probability (the end-of-text token included), as in Whisper.
    """

    text: str
    tokens: tuple[int, ...]
    words: tuple[TimedWord, ...]
    language: str
    language_probability: float
    avg_logprob: float
    no_speech_prob: float
    temperature: float


@dataclass(frozen=True)
class AsrModelInfo:
    """What an ASR model can do."""

    name: str
    multilingual: bool
    window_samples: int
    max_text_tokens: int
    languages: tuple[str, ...]


@runtime_checkable
class AsrModel(Protocol):
    """A batch speech recogniser (Whisper-like: audio windows in, text with word times out)."""

    @property
    def info(self) -> AsrModelInfo:
        """Static facts about the model."""
        ...

    def check_options(self, options: DecodeOptions) -> None:
        """Raise :class:`InvalidInput` or :class:`~voxserve.errors.Unsupported` for options it cannot run."""
        ...

    def transcribe_batch(self, requests: Sequence[AsrRequest]) -> list[AsrResult]:
        """Recognise every request; results are in request order."""
        ...

    def detect_language(self, audio: Float32Array) -> list[tuple[str, float]]:
        """Language probabilities for the audio, best first."""
        ...


@runtime_checkable
class VadModel(Protocol):
    """A voice activity detector that scores fixed-size frames of one stream, keeping state between calls."""

    @property
    def frame_samples(self) -> int:
        """Number of 16 kHz samples in one frame."""
        ...

    def reset(self) -> None:
        """Forget the stream state (start a new stream)."""
        ...

    def probabilities(self, audio: Float32Array) -> Float32Array:
        """Speech probability of each whole frame of ``audio`` (continuing the stream)."""
        ...
