"""Capability protocols that every backend implements, with their request and result types.

A backend wraps one runtime (CTranslate2, ONNX Runtime, ...) behind one of these protocols. Backends are
synchronous and blocking: the engine runs them in its worker threads, never on an event loop. They know
nothing about HTTP, queues or asyncio.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy.typing as npt

from voxserve.config import AsrConfig
from voxserve.errors import InvalidInput
from voxserve.types import SAMPLE_RATE, Float32Array, Task, TokenLogprob


@dataclass(frozen=True)
class AsrLoadOptions:
    """Where and how a speech recogniser runs, packed once from the settings (:meth:`from_settings`) and
    handed unchanged to the backend (in this process or on every Ray replica).

    Attributes:
        device: ``cpu``, ``cuda`` or ``auto``.
        compute_type: the backend's compute type; ``default`` picks int8 on CPU and float16 on CUDA.
        workers: concurrent batches inside the model (one per core is fastest on CPU).
        threads_per_worker: threads inside one batch.
        encode_batch_size: windows per encoder call; 0 = the backend's choice (1 on CPU, 64 on GPU).
        device_index: the GPU when ``device`` is cuda.
    """

    device: str = AsrConfig.model_fields["device"].default
    compute_type: str = AsrConfig.model_fields["compute_type"].default
    workers: int = 1
    threads_per_worker: int = AsrConfig.model_fields["threads_per_worker"].default
    encode_batch_size: int = 0
    device_index: int = 0

    @classmethod
    def from_settings(cls, asr: AsrConfig, *, workers: int | None = None,
                      threads_per_worker: int | None = None) -> AsrLoadOptions:
        """The placement the ``asr`` settings describe; a Ray replica gives its own workers and threads."""
        return cls(
            device=asr.device,
            compute_type=asr.compute_type,
            workers=asr.workers if workers is None else workers,
            threads_per_worker=asr.threads_per_worker if threads_per_worker is None else threads_per_worker,
        )


WINDOW_S = 30
"""Whisper's encoder window (seconds)."""
FIT_PAD_S = 1.0
"""A fitted window is at least this much longer than its audio (Whisper needs some trailing context)."""


@dataclass(frozen=True)
class DecodeOptions:
    """Per-request decoding options of a speech recogniser.

    Attributes:
        language: ISO 639-1 code, or None to detect it from the audio.
        allowed_languages: when the language is detected, the most likely of these codes (empty = any).
        task: ``transcribe`` or ``translate`` (to English).
        prompt: text that conditions the decoder (previous text, vocabulary hints); trimmed to fit.
        prefix: the text of the audio's beginning, already known (Whisper's prefix): the decoder continues
            after it and the result holds only what follows, so speech heard with the audio before it (a
            short follow-up after its sentence's first half) is transcribed in that audio's context.
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
        repetition_penalty: above 1, tokens already generated are penalised (a deterministic way out of a
            decoder loop, used by the guard's retries; 1 = off).
    """

    language: str | None = None
    allowed_languages: tuple[str, ...] = ()
    task: Task = "transcribe"
    prompt: str | None = None
    prefix: str | None = None
    temperature: float = 0.0
    beam_size: int = 1
    best_of: int = 1
    word_timestamps: bool = True
    max_new_tokens: int | None = None
    window: str = "full"
    fit_step_s: float = 5.0
    repetition_penalty: float = 1.0

    def window_s(self, n_samples: int) -> float:
        """The encoder window a request of ``n_samples`` gets: 30 s, or fitted (the audio + ``FIT_PAD_S``
        rounded up to ``fit_step_s``, at most 30 s)."""
        if self.window == "full":
            return WINDOW_S
        return min(WINDOW_S, math.ceil((n_samples / SAMPLE_RATE + FIT_PAD_S) / self.fit_step_s) * self.fit_step_s)

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
        if not 1.0 <= self.repetition_penalty <= 3.0:
            raise InvalidInput("repetition_penalty must be between 1 and 3", param="repetition_penalty")
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
    logprobs: tuple[TokenLogprob, ...] = ()


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

    def batch_key(self, request: AsrRequest) -> Hashable:
        """Requests with equal keys share the model's calls inside :meth:`transcribe_batch`; others in the
        same batch run one after another (so a latency-bound batch should hold only one key)."""
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


@dataclass(frozen=True)
class SegmentationInfo:
    """How a local speaker segmentation model sees time.

    Attributes:
        name: the model's name.
        window_samples: audio samples in one window (shorter windows are zero-padded).
        frame_step: samples between the starts of two output frames.
        frame_size: samples one output frame covers (its receptive field).
        local_speakers: speakers the model can tell apart inside one window.
    """

    name: str
    window_samples: int
    frame_step: int
    frame_size: int
    local_speakers: int


@runtime_checkable
class SegmentationModel(Protocol):
    """Local speaker activity inside fixed windows (which speaker of the window speaks in each frame)."""

    @property
    def info(self) -> SegmentationInfo:
        """Static facts about the model."""
        ...

    def segment_batch(self, windows: Sequence[Float32Array]) -> list[Float32Array]:
        """For each window (at most ``window_samples`` long), activity of shape (frames, local_speakers) in
        [0, 1]; several local speakers may be active in one frame (overlapped speech)."""
        ...


@dataclass(frozen=True)
class EmbedderInfo:
    """What a speaker embedder produces.

    Attributes:
        name: the embedder's registered name.
        dim: the embedding size.
        min_samples: the shortest audio it gives a usable embedding for.
    """

    name: str
    dim: int
    min_samples: int


@runtime_checkable
class SpeakerEmbedder(Protocol):
    """Speech of one speaker -> an L2-normalised voice embedding (cosine similarity compares voices)."""

    @property
    def info(self) -> EmbedderInfo:
        """Static facts about the embedder."""
        ...

    def embed_batch(self, audios: Sequence[Float32Array]) -> list[Float32Array]:
        """One embedding of shape (dim,) per 16 kHz mono input, in input order."""
        ...


# ---------------------------------------------------------------------------------------- speech synthesis


@dataclass(frozen=True)
class SpeechOptions:
    """Per-request options of an acoustic model.

    Attributes:
        speed: speaking rate relative to the voice's own (0.25 to 4.0, as in OpenAI's API).
        seed: makes sampling repeatable where the model samples (None: random).
    """

    speed: float = 1.0
    seed: int | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for out-of-range values."""
        if not 0.25 <= self.speed <= 4.0:
            raise InvalidInput(f"speed must be between 0.25 and 4.0, not {self.speed}", param="speed")


@dataclass(frozen=True)
class VoiceInfo:
    """A voice that can be synthesized.

    Attributes:
        name: the name requests use (``joe``, a file path, ``tara``).
        language: BCP 47-like code (``en-US``) or ``""`` when unknown.
        sample_rate: output rate in Hz.
        backend: ``piper`` or ``orpheus`` (or another registered kind).
        description: a human-readable line.
        path: where the voice's files are, when it is a local file.
    """

    name: str
    language: str
    sample_rate: int
    backend: str
    description: str = ""
    path: str | None = None


@dataclass(frozen=True)
class DecoderInfo:
    """Facts about an audio decoder and the windows it decodes best.

    Attributes:
        name: identifies the decoder (one shared batcher per name).
        sample_rate: output rate in Hz.
        samples_per_frame: audio samples produced per input frame.
        context_frames: frames of context on each side of a window that make windowed decoding equal whole
            decoding (within float tolerance).
        first_frames: output frames of the first window of a stream (small: time to first audio).
        window_frames: output frames of later windows (large: less context overhead).
        stacks_batches: whether a batch runs as one stacked tensor (then equal window shapes matter).
    """

    name: str
    sample_rate: int
    samples_per_frame: int
    context_frames: int
    first_frames: int
    window_frames: int
    stacks_batches: bool = False


@dataclass(frozen=True, eq=False)
class FrameBlock:
    """Decoder input frames from an acoustic model: latents or codec codes, frames on the last axis.

    ``end_of_unit`` closes the unit (a sentence) the frames belong to: units are decoded independently and
    their audio is concatenated. ``words``: where each spoken word lies among the frames, when the model knows
    (Piper: from its per-phoneme durations; empty otherwise).
    """

    frames: npt.NDArray[Any]
    end_of_unit: bool = True
    words: tuple[FrameWord, ...] = ()


@dataclass(frozen=True)
class FrameWord:
    """A spoken word's place among a :class:`FrameBlock`'s frames (from the model's own durations).

    Attributes:
        text: the word as spoken (after normalisation: "doctor", not "Dr.").
        start_frame: the block's frame where the word starts.
        end_frame: one past the block's frame where it ends.
    """

    text: str
    start_frame: int
    end_frame: int


@runtime_checkable
class AcousticModel(Protocol):
    """Stage 1 of synthesis, run per stream: text -> decoder input frames (latents or codec tokens)."""

    @property
    def voice(self) -> VoiceInfo:
        """The voice this model speaks with."""
        ...

    def check_options(self, options: SpeechOptions) -> None:
        """Raise :class:`InvalidInput` or :class:`~voxserve.errors.Unsupported` for options it cannot honour."""
        ...

    def frames(self, text: str, options: SpeechOptions, first_frames: int = 0) -> Iterator[FrameBlock]:
        """Frames for ``text`` (already in speakable form), in blocks; each ``next()`` may run the model.
        ``first_frames`` > 0 asks for the first frames as soon as the model can give them (a listener waits for
        them): a model that makes a unit's frames in one piece may give them in a block of their own first."""
        ...


@runtime_checkable
class AudioDecoder(Protocol):
    """Stage 2 of synthesis, batched across streams: windows of frames -> audio samples."""

    @property
    def info(self) -> DecoderInfo:
        """Static facts about the decoder."""
        ...

    def decode_batch(self, windows: Sequence[npt.NDArray[Any]]) -> list[Float32Array]:
        """Decode each window (frames on the last axis) to ``frames * samples_per_frame`` samples, in order."""
        ...


VoiceLoader = Callable[[], tuple[AcousticModel, AudioDecoder]]
"""Loads a voice's acoustic model and decoder (called once, on first use)."""


@dataclass(frozen=True)
class VoiceEntry:
    """A voice a catalog can offer: what it is and how to load it."""

    info: VoiceInfo
    load: VoiceLoader
    aliases: tuple[str, ...] = ()
