"""The speech synthesis service: voices, admission control, streams, whole-text synthesis and metrics hooks.

One :class:`TtsService` per process owns the voice pool (acoustic models and the decoders' shared batchers) and
the runner where acoustic models run, most urgent stream first. Transports (CLI, HTTP, WebSocket) only call :meth:`TtsService.stream`,
:meth:`TtsService.synthesize` and :meth:`TtsService.voices`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace

import numpy as np

from voxserve.backends.base import VoiceInfo
from voxserve.backends.tts.catalog import OrpheusSettings, PiperRuntime, build_catalog
from voxserve.config import TtsConfig
from voxserve.engine.batcher import BatcherConfig, BatchObserver
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.tts_pool import AcousticRunner, LoadedVoice, VoicePool
from voxserve.errors import InvalidInput, Overloaded
from voxserve.streaming.tts import SpeakOptions, StreamStatus, TtsObserver, TtsStream, TtsStreamParams, TtsStreamStats
from voxserve.text.lexicon import EMPTY_LEXICON, Lexicon
from voxserve.text.speakable import has_speech
from voxserve.types import Float32Array, SpokenWord

DEFAULT_PARAMS = TtsStreamParams()
DEFAULT_OPTIONS = SpeakOptions()


@dataclass(frozen=True, eq=False)
class SynthesisResult:
    """The whole audio of one text.

    Attributes:
        audio: mono float32 samples in [-1, 1].
        sample_rate: the voice's rate in Hz.
        voice: the voice's name.
        stats: the stream's timing (time to first audio, real-time factor, ...).
        words: every spoken word with its start and end in seconds of ``audio`` (from the voice's own durations;
            empty for voices that do not give them).
    """

    audio: Float32Array
    sample_rate: int
    voice: str
    stats: TtsStreamStats
    words: tuple[SpokenWord, ...] = ()

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return len(self.audio) / self.sample_rate


class TtsService:
    """Streams and whole-text synthesis over shared voices, with a limit on concurrent streams."""

    def __init__(
        self,
        pool: VoicePool,
        params: TtsStreamParams = DEFAULT_PARAMS,
        *,
        max_streams: int = 16,
        acoustic: BatcherConfig | None = None,
        observer: TtsObserver | None = None,
        lexicon: Lexicon = EMPTY_LEXICON,
    ) -> None:
        if max_streams < 1:
            raise InvalidInput("max_streams must be at least 1")
        self.pool = pool
        self.params = params
        self.max_streams = max_streams
        self.observer = observer
        self.lexicon = lexicon  # the server's pronunciations; a request's entries override them
        self.executor = BlockingExecutor(max_workers=2, name="voxserve-tts-load")
        self.acoustic = AcousticRunner(acoustic)
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active_streams(self) -> int:
        """Streams admitted and not yet ended."""
        with self._lock:
            return self._active

    def voices(self) -> list[VoiceInfo]:
        """Every voice this process can speak with (the default first)."""
        return self.pool.catalog.voices()

    def voice_info(self, voice: str | None = None) -> VoiceInfo:
        """Describe a voice by name, alias or path.

        Raises:
            InvalidInput: the voice is unknown.
        """
        return self.pool.catalog.resolve(voice).info

    async def load(self, voice: str | None = None) -> VoiceInfo:
        """Load a voice now (off the event loop) so that its first stream starts fast."""
        loaded = await self._load(voice)
        return loaded.info

    def stream(self, voice: str | None = None, options: SpeakOptions = DEFAULT_OPTIONS) -> TtsStream:
        """Open a synthesis stream (call inside a running event loop).

        Args:
            voice: a voice name, alias or Piper ``.onnx`` path; None for the default voice.
            options: speed, sample format, priority, text normalisation, SSML, pronunciations.

        Raises:
            InvalidInput: unknown voice or bad options.
            Overloaded: ``max_streams`` streams are active already (retry later).
        """
        return self._open(voice, options, paced=True)

    def _open(self, voice: str | None, options: SpeakOptions, *, paced: bool) -> TtsStream:
        options.validate()
        info = self.voice_info(voice)
        lexicon = self.lexicon.merged(Lexicon.from_mapping(options.pronunciations))
        with self._lock:
            if self._active >= self.max_streams:
                raise Overloaded(f"{self._active} synthesis streams are active (limit {self.max_streams})",
                                 retry_after_s=1.0)
            self._active += 1
            active = self._active
        try:
            stream = TtsStream(lambda: self._load(voice), self.acoustic, self.params, options, voice_name=info.name,
                               observer=self.observer, on_finish=self._release, paced=paced, lexicon=lexicon)
        except BaseException:
            self._release(None, "failed")
            raise
        if self.observer is not None:
            self.observer.on_stream_start(stream.id, info.name, active)
        return stream

    async def synthesize(
        self, text: str, voice: str | None = None, options: SpeakOptions = DEFAULT_OPTIONS
    ) -> SynthesisResult:
        """Synthesize a whole text (any length: it is segmented like a stream; SSML when it starts with
        ``<speak>`` or ``options.ssml`` says so) and return all its audio.

        Unlike a stream, it never pauses to stay near real time: its caller waits for all the audio.

        Raises:
            InvalidInput: empty or too long text, malformed SSML, unknown voice, bad options.
            Overloaded: too many active streams.
        """
        options.validate()
        if not isinstance(text, str) or not has_speech(text):
            raise InvalidInput("input text is empty", param="input", code="empty_input")
        if len(text) > self.params.max_input_chars:
            raise InvalidInput(f"input is longer than {self.params.max_input_chars} characters", param="input",
                               code="input_too_long")
        float_options = replace(options, sample_format="float32")
        async with self._open(voice, float_options, paced=False) as stream:  # the caller waits for all of it
            stream.push_text(text)
            stream.end_input()
            chunks = [chunk async for chunk in stream]
        audio = np.concatenate([c.audio for c in chunks]).astype(np.float32) if chunks else np.zeros(0, np.float32)
        words = tuple(w for c in chunks for w in c.words)
        return SynthesisResult(audio, stream.stats.sample_rate, stream.stats.voice, stream.stats, words)

    async def _load(self, voice: str | None) -> LoadedVoice:
        return await self.executor.run(self.pool.voice, voice)

    def _release(self, _stream: TtsStream | None, _status: StreamStatus) -> int:
        with self._lock:
            self._active -= 1
            return self._active

    def close(self) -> None:
        """Stop the decoders' batchers, the acoustic runner and the executor."""
        self.pool.close()
        self.acoustic.close()
        self.executor.shutdown()


def build_tts_service(
    config: TtsConfig, observer: TtsObserver | None = None, batch_observer: BatchObserver | None = None
) -> TtsService:
    """A :class:`TtsService` for the process settings (voices load on first use)."""
    gpu = config.device == "cuda" or (bool(config.orpheus_model) and config.orpheus_device in ("cuda", "auto")
                                       and _cuda_available())
    catalog = build_catalog(
        voices_dir=config.voices_dir or None,
        piper=PiperRuntime(threads=1, device=config.device, stack_batches=config.device == "cuda",
                           noise_scale=config.noise_scale, noise_w=config.noise_w),
        orpheus=OrpheusSettings(config.orpheus_model, config.orpheus_snac, config.orpheus_voices, config.orpheus_device)
        if config.orpheus_model else None,
        default_voice=config.voice,
        openai_aliases=config.openai_voice_aliases,
    )
    batcher = BatcherConfig(
        max_batch_size=config.decoder_max_batch_size or (32 if gpu else 1),
        max_wait_ms=config.decoder_max_wait_ms,
        offline_wait_ms=config.decoder_max_wait_ms,
        workers=config.decoder_workers or (1 if gpu else max(1, os.cpu_count() or 1)),
        max_queue=4096,
        urgent_workers=0 if gpu else config.urgent_workers,
        urgent_horizon_s=config.urgent_horizon_s,
        background_nice=0 if gpu else config.background_nice,
    )
    params = TtsStreamParams(
        first_frames=config.first_window_frames or None,
        window_frames=config.window_frames or None,
        context_frames=config.context_frames if config.context_frames >= 0 else None,
        max_input_chars=config.max_input_chars,
        urgent_buffer_s=config.urgent_buffer_s,
        max_ahead_s=config.max_ahead_s,
    )
    pool = VoicePool(catalog, batcher, batch_observer)
    lexicon = Lexicon.load(config.lexicon_file, "tts.lexicon_file") if config.lexicon_file else EMPTY_LEXICON
    acoustic = replace(batcher, workers=config.acoustic_workers)
    return TtsService(pool, params, max_streams=config.max_streams, acoustic=acoustic,
                      observer=observer, lexicon=lexicon)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
