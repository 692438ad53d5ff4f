"""The front door and composition root: settings -> engine (models, batchers, executor) -> pipelines.

:class:`Voxserve` is the one way in, for library users, the CLI, the server and the benchmarks alike: one
method per job, each in a synchronous form and an ``a``-prefixed async twin::

    from voxserve import Voxserve

    with Voxserve() as vox:                      # the embedded default models, settings from VOXSERVE_*
        print(vox.transcribe("talk.mp3").text)
        turns = vox.diarize("meeting.wav").turns
        vox.speak("Hello there.").audio          # float32 samples at .sample_rate

Nothing below this module knows about the CLI or the server.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import numpy as np

from voxserve.audio import AudioSource, decode_audio, decode_channels
from voxserve.backends.base import DecodeOptions
from voxserve.backends.registry import load_live_vad, load_vad, resolve_asr
from voxserve.backends.vad.pool import VadPool
from voxserve.config import Settings, load_settings
from voxserve.engine.batcher import BatchObserver
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import ModelPool, Recognizer
from voxserve.errors import InvalidInput
from voxserve.languages import PER_SEGMENT
from voxserve.pipelines.guard import GuardConfig
from voxserve.pipelines.long_asr import LongAsrOptions, LongFileTranscriber, ProgressHook, TextHook
from voxserve.pipelines.vad import VadParams
from voxserve.streaming.live_asr import LiveOptions, LiveStream, LiveTranscriber
from voxserve.streaming.tts import SpeakOptions, TtsStream
from voxserve.streaming.tts_service import DEFAULT_OPTIONS, SynthesisResult, TtsService, build_tts_service
from voxserve.text.keyterms import parse_keyterms
from voxserve.types import Diarization, Float32Array, Priority, Task, Transcript

if TYPE_CHECKING:
    from voxserve.agent.cascade import Agent
    from voxserve.distributed.cluster import ReplicaPool
    from voxserve.engine.speaker_pool import SpeakerModelPool
    from voxserve.pipelines.diarization import DiarizeOptions, Diarizer
    from voxserve.pipelines.known_speakers import KnownSpeaker
    from voxserve.streaming.live_asr import SpeakerEmbedder

T = TypeVar("T")

Source: TypeAlias = AudioSource | Float32Array
"""What a file job reads: a path, bytes or a binary file object (any common container), or 16 kHz mono
float32 samples already decoded."""


class Voxserve:
    """One engine shared by every job of the process: the library's front door.

    ``Voxserve(settings=None)`` uses the defaults (and ``VOXSERVE_*`` environment variables); models load on
    first use. Use it as a context manager (``with`` or ``async with``) or call :meth:`close`. Each job has a
    synchronous method and an async twin (``transcribe`` / ``atranscribe``, ...); the synchronous ones run
    their own event loop and refuse to run inside one. Streams (:meth:`live`, :meth:`speak_stream`) are
    opened inside a running event loop.
    """

    def __init__(self, settings: Settings | None = None, observer: BatchObserver | None = None) -> None:
        settings = settings if settings is not None else load_settings()
        self.settings = settings
        self.pool: ModelPool | ReplicaPool = _asr_pool(settings, observer)
        self.executor = BlockingExecutor(max_workers=max(4, settings.asr.workers * 2))
        self._batch_observer = observer
        self._tts: TtsService | None = None  # built on first use by tts()
        self._speakers: SpeakerModelPool | None = None  # built on first use by speakers()
        self._agent: Agent | None = None  # built on first use by agent()
        self._agent_lock = threading.Lock()
        self.live_vads = VadPool(load_live_vad)
        """The live streams' and agents' VADs, reused from stream to stream."""

    def __enter__(self) -> Voxserve:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Voxserve:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    @staticmethod
    def _sync(coro: Coroutine[Any, Any, T]) -> T:
        """Run a job's coroutine to its end in a loop of its own (the synchronous twins)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        coro.close()
        raise RuntimeError("a synchronous Voxserve method was called inside a running event loop: "
                           "await its a-prefixed twin (e.g. await vox.atranscribe(...))")

    def asr(self, model: str | None = None) -> Recognizer:
        """The shared service of a model (loaded on first use): in this process, or its replicas on Ray."""
        return self.pool.asr(model)

    def check_model(self, model: str | None = None) -> None:
        """Raise :class:`ModelUnavailable` for a speech model that is neither registered nor a local directory,
        without loading it (:meth:`atranscribe` loads it while the file's speech is being found)."""
        resolve_asr(model or self.settings.asr.model)

    def guard_config(self) -> GuardConfig:
        """The hallucination guard as the process settings configure it (long files and live streams)."""
        return GuardConfig.from_settings(self.settings.guard)

    def long_options(
        self,
        *,
        language: str | None = None,
        task: Task = "transcribe",
        prompt: str | None = None,
        temperature: float = 0.0,
        word_timestamps: bool = True,
        max_duration_s: float | None = None,
        vad: VadParams | None = None,
        keyterms: Sequence[str] = (),
        allowed_languages: Sequence[str] = (),
    ) -> LongAsrOptions:
        """Per-request options for a long file, completed from the process settings (``vad``: this request's
        speech detection instead of the settings', e.g. OpenAI's ``chunking_strategy``).

        ``keyterms``: words and names to favour (after the settings' ``asr.keyterms``). ``language``:
        a code, None to detect the file's language from its first speech, or ``"auto-per-segment"``
        (:data:`~voxserve.languages.PER_SEGMENT`) to detect it per chunk and record it on every segment;
        ``allowed_languages`` restricts detection to these codes.

        Raises:
            InvalidInput: malformed key terms, or ``allowed_languages`` with a given language."""
        per_segment = language == PER_SEGMENT
        if allowed_languages and language is not None and not per_segment:
            raise InvalidInput("allowed_languages restricts a detected language; give no language",
                               param="allowed_languages")
        decode = DecodeOptions(language=None if per_segment else language, task=task, prompt=prompt,
                               temperature=temperature, word_timestamps=word_timestamps,
                               allowed_languages=tuple(allowed_languages))
        return LongAsrOptions.from_settings(self.settings, decode, vad=vad, max_duration_s=max_duration_s,
                                            keyterms=parse_keyterms(keyterms), language_per_segment=per_segment)

    async def atranscribe(
        self,
        source: Source,
        options: LongAsrOptions | None = None,
        *,
        speakers: DiarizeOptions | bool | None = None,
        model: str | None = None,
        embedder: str | None = None,
        progress: ProgressHook | None = None,
        on_text: TextHook | None = None,
        priority: Priority = Priority.OFFLINE,
        split_channels: bool = False,
        **overrides: Any,
    ) -> Transcript:
        """Transcribe a file of any length (:data:`Source`: a path, bytes, a binary file object, or samples).

        Args:
            options: the pipeline's options; None = :meth:`long_options` with ``overrides`` (``language``,
                ``task``, ``prompt``, ``word_timestamps``, ``vad``, ...).
            speakers: diarize at the same time (True, or :meth:`diarize_options`): every word and segment
                gets a speaker, segments split at speaker changes, ``Transcript.diarization`` holds the turns.
            model: a registered model name or a model directory (default: ``asr.model``).
            embedder: the speaker embedder when ``speakers`` is set (default: ``diarization.embedder``).
            progress: called with (seconds done, seconds in all) as chunks finish.
            on_text: receives each chunk's text in file order as soon as it is final (streaming).
            split_channels: one speaker a channel (calls): each channel is transcribed on its own, all of them
                in the same shared batches, and merged by time; segments carry ``channel`` and the speaker
                ``channel_0``, ``channel_1``, ...; another channel's leak is not transcribed twice
                (:mod:`voxserve.pipelines.channels`). A mono file is ``channel_0``, and so is a channel
                repeating another; samples may be (channels, samples). Not with ``speakers`` or ``on_text``.

        Raises:
            InvalidInput: bad, empty or too long audio, or bad options.
            ModelUnavailable: an unknown model, or ``speakers`` without the ``[diarize]`` extra.
        """
        if options is None:
            options = self.long_options(**overrides)
        elif overrides:
            raise TypeError("give either options or keyword overrides, not both")
        if split_channels:
            if speakers or on_text is not None:
                raise InvalidInput("split_channels labels speakers by channel: not with diarization or streamed text",
                                   param="split_channels")
            return await self._by_channel(source, options, model=model, progress=progress, priority=priority)
        if speakers:
            diarize = None if speakers is True else speakers
            return await self._with_speakers(source, options, diarize, model=model, embedder=embedder,
                                             progress=progress, priority=priority)
        fresh_after_s = self.settings.chunking.vad_fresh_after_s
        transcriber = LongFileTranscriber(lambda: self.asr(model), self.executor, lambda: load_vad(fresh_after_s),
                                          priority)
        return await transcriber.run(source, options, progress, on_text)

    def transcribe(self, source: Source, options: LongAsrOptions | None = None, **kwargs: Any) -> Transcript:
        """Synchronous :meth:`atranscribe`."""
        return self._sync(self.atranscribe(source, options, **kwargs))

    # ------------------------------------------------------------------------------ live transcription

    def live_options(self, **overrides: Any) -> LiveOptions:
        """Options of a live stream, completed from the process settings (``live.*`` and the guard);
        ``overrides`` set any :class:`LiveOptions` field (``vad``, ``decode``, ``speakers``, ``keyterms``: the
        settings' ``asr.keyterms`` when not given, ...)."""
        base = LiveOptions.from_settings(self.settings.live, self.settings.guard)
        return replace(base, **{"keyterms": parse_keyterms(self.settings.asr.keyterms), **overrides})

    def live(self, options: LiveOptions | None = None, *, model: str | None = None,
             stream_id: str | None = None,
             known_speakers: Sequence[KnownSpeaker] | Mapping[str, Float32Array] = ()) -> LiveStream:
        """A live transcription stream (open it inside a running event loop): ``push(samples)`` 16 kHz mono
        float32 audio, ``end_input()``, and iterate its events (speech started/stopped, partials, deltas,
        completed transcripts). Streams share the recogniser's batches with every other job.

        ``known_speakers`` (added to ``options.known_speakers``; either implies speaker labels): enrolled
        voices from :meth:`aknown_speaker` (``await vox.aknown_speaker("alice", "alice.wav")`` for a clip), or
        name -> embedding by ``diarization.naming_embedder``. An utterance that matches one of them well enough
        (its embedding by that embedder, cosine similarity >= the embedder's naming threshold) carries its
        name; the others get ``A``, ``B``, ...

        Raises:
            InvalidInput: bad options, or known speakers of different embedders, repeated names, embeddings
            of the wrong size (param ``known_speaker_names``). ModelUnavailable: an unknown model, or speaker
            labels without the ``[diarize]`` extra.
        """
        options = options if options is not None else self.live_options()
        given = self._known_for_live(known_speakers)
        if given or options.known_speakers:
            options = replace(options, speakers=True, known_speakers=options.known_speakers + given)
        embedder = self.live_speaker_embedder() if options.speakers else None
        naming = None
        if options.known_speakers:
            options, naming = self._live_naming(options, embedder)
        transcriber = LiveTranscriber(self.asr(model), self.live_vads, self.executor, embedder, naming)
        return transcriber.stream(options, stream_id=stream_id)

    def _known_for_live(self, known: Sequence[KnownSpeaker] | Mapping[str, Float32Array]) -> tuple[KnownSpeaker, ...]:
        """Known speakers as given to :meth:`live` (embeddings by name are the naming embedder's)."""
        from voxserve.pipelines.known_speakers import KnownSpeaker

        if not isinstance(known, Mapping):
            return tuple(known)
        embedder = self.settings.diarization.naming_embedder
        return tuple(KnownSpeaker(name, np.asarray(e, dtype=np.float32).reshape(-1), embedder)
                     for name, e in known.items())

    def _live_naming(self, options: LiveOptions, labels: SpeakerEmbedder | None
                     ) -> tuple[LiveOptions, SpeakerEmbedder]:
        """The stream's naming threshold and the embedder of its known speakers (``labels`` when it is the
        same model), after checking the speakers against that embedder."""
        from voxserve.backends.diarization.weights import check_installed
        from voxserve.pipelines.diarization import DiarizationParams
        from voxserve.pipelines.known_speakers import check_known

        d = self.settings.diarization
        name = options.known_speakers[0].embedder
        check_installed(name)
        check_known(options.known_speakers, name, self.speakers().embedder(name).info.dim)
        if options.naming_threshold is None:
            options = replace(options, naming_threshold=DiarizationParams.from_settings(d, name).naming_threshold)
        naming = labels if labels is not None and name == d.embedder else self.live_speaker_embedder(name)
        return options, naming

    # ------------------------------------------------------------------------------ speech synthesis

    def tts(self) -> TtsService:
        """The shared speech synthesis service (voices load on first use). Its ``observer`` attribute receives
        stream metrics; decoder batches go to this engine's batch observer."""
        if self._tts is None:
            self._tts = build_tts_service(self.settings.tts, batch_observer=self._batch_observer)
        return self._tts

    async def aspeak(self, text: str, voice: str | None = None, options: SpeakOptions = DEFAULT_OPTIONS) -> SynthesisResult:
        """Speak a whole text (any length) and return all its audio (float32 at ``.sample_rate``). Text that
        starts with ``<speak>`` is SSML (:mod:`voxserve.text.ssml`); ``options.pronunciations`` respell words.

        Raises:
            InvalidInput: empty or too long text, malformed SSML, unknown voice, bad options.
            ModelUnavailable: the ``[tts]`` extra is not installed.
        """
        return await self.tts().synthesize(text, voice, options)

    def speak(self, text: str, voice: str | None = None, options: SpeakOptions = DEFAULT_OPTIONS) -> SynthesisResult:
        """Synchronous :meth:`aspeak`."""
        return self._sync(self.aspeak(text, voice, options))

    def speak_stream(self, voice: str | None = None, options: SpeakOptions = DEFAULT_OPTIONS) -> TtsStream:
        """A synthesis stream (open it inside a running event loop): ``push_text`` as text arrives (e.g. from
        an LLM), ``end_input()``, and iterate audio chunks as they are ready (``async with`` closes it)."""
        return self.tts().stream(voice, options)

    # ------------------------------------------------------------------------------ diarization

    def agent(self) -> Agent:
        """The shared voice agent (:class:`~voxserve.agent.cascade.Agent`, ``[agent]`` extra): this engine's
        recogniser, executor and synthesis plus the configured LLM and knowledge index. Built on first use;
        blocking (models load), so call it off the event loop.

        Raises:
            ModelUnavailable: the ``[agent]`` extra is not installed.
        """
        with self._agent_lock:
            if self._agent is None:
                from voxserve.agent.build import build_agent

                a = self.settings.agent
                self._agent = build_agent(a, self.asr(a.asr_model or None), self.executor, self.tts(),
                                          self.live_vads)
            return self._agent

    def speakers(self) -> SpeakerModelPool:
        """The shared diarization models (:class:`~voxserve.engine.speaker_pool.SpeakerModelPool`)."""
        if self._speakers is None:
            from voxserve.engine.speaker_pool import SpeakerModelPool, SpeakerModelsConfig

            d = self.settings.diarization
            self._speakers = SpeakerModelPool(
                SpeakerModelsConfig.from_settings(d),
                self._batch_observer,
            )
        return self._speakers

    def live_speaker_embedder(self, embedder: str | None = None) -> SpeakerEmbedder:
        """An async function: utterance audio -> speaker embedding, through the shared ``embedder``'s batcher
        (default: ``diarization.embedder``) at live priority (for speaker labels and names on live streams;
        needs ``voxserve[diarize]``)."""
        service = self.speakers().embedder(embedder)

        async def embed(audio: Float32Array) -> Float32Array:
            return (await service.embed([audio], Priority.LIVE))[0]

        return embed

    def diarize_options(
        self,
        *,
        num_speakers: int | None = None,
        min_speakers: int | None = None,
        max_speakers: int | None = None,
        max_duration_s: float | None = None,
        known_speakers: Sequence[KnownSpeaker] = (),
    ) -> DiarizeOptions:
        """Per-request diarization options (:class:`~voxserve.pipelines.diarization.DiarizeOptions`);
        ``known_speakers`` (from :meth:`aknown_speaker`) name the speakers whose voices match them."""
        from voxserve.pipelines.diarization import DiarizeOptions
        from voxserve.pipelines.speaker_clustering import SpeakerCount

        options = DiarizeOptions(SpeakerCount(num_speakers, min_speakers, max_speakers), max_duration_s,
                                 tuple(known_speakers))
        options.validate()
        return options

    async def adiarize(
        self,
        source: Source,
        options: DiarizeOptions | None = None,
        *,
        embedder: str | None = None,
        progress: ProgressHook | None = None,
        priority: Priority = Priority.OFFLINE,
        known_speakers: Mapping[str, Source] | None = None,
        **count: int | None,
    ) -> Diarization:
        """Who spoke when in a file of any length: speaker turns (overlap kept), labels ``A``, ``B``, ...
        and per-stage wall times. ``options`` come from :meth:`diarize_options`; or give its keywords
        (``num_speakers``, ``min_speakers``, ``max_speakers``); default: an automatic count.
        ``known_speakers`` (name -> reference clip of that voice, 1-30 s) are enrolled and added to the
        options' known speakers: a speaker whose voice matches one well enough carries its name. With known
        speakers the default ``embedder`` is theirs (``diarization.naming_embedder`` for clips).

        Raises:
            ModelUnavailable: the ``[diarize]`` extra is not installed, or ``embedder`` is unknown.
            InvalidInput: bad audio, references or options.
        """
        if embedder is None and (known_speakers or (options is not None and options.known_speakers)):
            given = options.known_speakers if options is not None and options.known_speakers else ()
            embedder = given[0].embedder if given else self.settings.diarization.naming_embedder
        diarizer = await self.adiarizer(embedder, priority)
        if options is None:
            options = self.diarize_options(num_speakers=count.pop("num_speakers", None),
                                           min_speakers=count.pop("min_speakers", None),
                                           max_speakers=count.pop("max_speakers", None))
            if count:
                raise TypeError(f"unknown keywords {', '.join(count)}")
        elif count:
            raise TypeError("give either options or speaker-count keywords, not both")
        if known_speakers:
            enrolled = [await diarizer.enroll(n, s) for n, s in known_speakers.items()]
            options = replace(options, known_speakers=options.known_speakers + tuple(enrolled))
        return await diarizer.run(source, options, progress)

    async def adiarizer(self, embedder: str | None = None, priority: Priority = Priority.OFFLINE) -> Diarizer:
        """A :class:`~voxserve.pipelines.diarization.Diarizer` on the shared models (loaded off the event
        loop) with the settings' parameters for ``embedder`` (default: ``diarization.embedder``)."""
        from voxserve.backends.diarization.weights import check_installed
        from voxserve.pipelines.diarization import DiarizationParams, Diarizer

        d = self.settings.diarization
        name = embedder or d.embedder
        check_installed(name)
        pool = self.speakers()
        segmentation, embedding = await self.executor.run(lambda: (pool.segmentation(), pool.embedder(name)))
        return Diarizer(segmentation, embedding, self.executor, DiarizationParams.from_settings(d, name), priority)

    async def aknown_speaker(self, name: str, source: Source, *, embedder: str | None = None) -> KnownSpeaker:
        """Enroll a voice: ``source`` is a clip of that one person (1-30 s, at least 1 s of speech); the
        result goes into :meth:`diarize_options` ``known_speakers`` (only with the same ``embedder``; default:
        ``diarization.naming_embedder``).

        Raises:
            InvalidInput: not audio, too long, or too little speech (param ``known_speaker_references``).
        """
        return await (await self.adiarizer(embedder or self.settings.diarization.naming_embedder)).enroll(name, source)

    def known_speaker(self, name: str, source: Source, *, embedder: str | None = None) -> KnownSpeaker:
        """Synchronous :meth:`aknown_speaker`."""
        return self._sync(self.aknown_speaker(name, source, embedder=embedder))

    def diarize(self, source: Source, options: DiarizeOptions | None = None, **kwargs: Any) -> Diarization:
        """Synchronous :meth:`adiarize`."""
        return self._sync(self.adiarize(source, options, **kwargs))

    async def _by_channel(self, source: Source, options: LongAsrOptions, *, model: str | None,
                          progress: ProgressHook | None, priority: Priority) -> Transcript:
        """Each channel transcribed on its own, concurrently (their chunks share the batches), after the
        others' leak is silenced in it; the transcripts merged by time with a speaker per channel."""
        from voxserve.pipelines.channels import channel_progress, distinct_channels, merge_channels, suppress_crosstalk

        started = time.monotonic()
        if isinstance(source, np.ndarray):
            audio = np.atleast_2d(np.asarray(source, dtype=np.float32))
        else:
            audio = await self.executor.run(decode_channels, source, max_duration_s=options.max_duration_s)
        channels = distinct_channels(audio)  # a mono recording stored as stereo is one channel
        clean = await self.executor.run(suppress_crosstalk, audio[channels])
        timed = replace(options, decode=replace(options.decode, word_timestamps=True))  # leak is judged per word
        transcripts = await asyncio.gather(*(
            self.atranscribe(np.ascontiguousarray(samples), timed, model=model, progress=hook, priority=priority)
            for samples, hook in zip(clean, channel_progress(progress, len(clean)), strict=True)
        ))
        return merge_channels(transcripts, audio, channels, time.monotonic() - started)

    async def _with_speakers(
        self,
        source: Source,
        options: LongAsrOptions,
        diarize: DiarizeOptions | None,
        *,
        model: str | None,
        embedder: str | None,
        progress: ProgressHook | None,
        priority: Priority,
    ) -> Transcript:
        """Transcription and diarization of one file side by side, then speakers given to words (word
        timestamps give word-level speakers; without them a segment gets the speaker overlapping it most)."""
        from voxserve.pipelines.speaker_words import assign_speakers

        if isinstance(source, np.ndarray):
            audio = source
        else:  # both pipelines need the samples: decode the file once
            audio = await self.executor.run(decode_audio, source, max_duration_s=options.max_duration_s)
        transcript, diarization = await asyncio.gather(
            self.atranscribe(audio, options, model=model, progress=progress, priority=priority),
            self.adiarize(audio, diarize, embedder=embedder, priority=priority),
        )
        return assign_speakers(transcript, diarization)

    def close(self) -> None:
        """Stop batchers and helper threads."""
        if self._agent is not None:
            self._agent.close()
        if self._tts is not None:
            self._tts.close()
        if self._speakers is not None:
            self._speakers.close()
        self.pool.close()
        self.executor.shutdown()


def _asr_pool(settings: Settings, observer: BatchObserver | None) -> ModelPool | ReplicaPool:
    """Speech recognisers in this process, or replicas on Ray when ``settings.ray.enabled`` (``[ray]`` extra)."""
    if settings.ray.enabled:
        from voxserve.distributed.cluster import ReplicaPool

        return ReplicaPool(settings.asr, settings.ray, observer)
    return ModelPool(settings.asr, observer)
