"""Speaker diarization of a whole file: decode -> segmentation -> embeddings -> clustering -> turns.

1. Segmentation: the local segmentation model runs over sliding windows (10 s, every ``step_s``) and
   says which of its local speakers is active in each frame, overlap included.
2. Embeddings: each local speaker's track in a window is cut into pieces of about ``piece_s`` of speech;
   each piece gets one voice embedding (from its frames without overlap, when there are enough), batched
   through the engine with the pieces of every other request.
3. Clustering: the embeddings are grouped into global speakers (automatic count, or the caller's), with
   pieces of two local speakers of one window kept apart (agglomerative with a distance cut; spectral
   with an eigen-gap count from :data:`SPECTRAL_FROM` embeddings on); every piece takes its nearest cluster.
4. Turns: the global speakers' activity is aggregated over windows; in each frame the most active speakers
   are kept, as many as the windows say speak there (so overlapped speech keeps two speakers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from voxserve.audio import decode_audio
from voxserve.backends.base import SegmentationInfo
from voxserve.config import DiarizationConfig
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.speaker_pool import EmbeddingService, SegmentationService
from voxserve.errors import InvalidInput
from voxserve.pipelines.known_speakers import (
    MAX_REFERENCE_S,
    MIN_REFERENCE_SPEECH_S,
    NAMING_THRESHOLDS,
    KnownSpeaker,
    check_known,
    match_names,
    similarities,
)
from voxserve.pipelines.speaker_activity import WindowPlan, aggregate, plan_windows, speaker_count, top_speakers
from voxserve.pipelines.speaker_clustering import (
    ClusteringParams,
    SpeakerCount,
    centroids_of,
    cluster_embeddings,
    nearest_centroid,
)
from voxserve.pipelines.speaker_pieces import Piece, cannot_link, cut_pieces, piece_activity
from voxserve.pipelines.speaker_turns import TurnRules, label_spans, turn_spans
from voxserve.types import SAMPLE_RATE, Diarization, DiarizationStats, Float32Array, Priority, SpeakerTurn

ProgressHook = Callable[[float, float], None]
"""Called with (audio seconds done, audio seconds in total); done advances through the stages."""

STAGE_SHARE = {"segmentation": 0.35, "embeddings": 0.55, "clustering": 0.1}


THRESHOLDS = {"resemblyzer": 0.4, "campplus": 0.5}
"""Clustering cut per embedder (cosine distance, average linkage), measured on the corpus's AMI excerpts."""
SPECTRAL_FROM = 50
"""Files with at least this many piece embeddings (about a minute of speech and more) are clustered
spectrally with an eigen-gap count; shorter ones keep the agglomerative cut. Tuned on the tune half: its
30 s AMI excerpts have 0-22 embedded pieces (spectral clustering did worse there: 41-48 % DER), its 3-4
minute built meetings 190-276 (spectral: 15.2 % against 42.1 %); any value between gives the same result."""


@dataclass(frozen=True)
class DiarizationParams:
    """Tuned constants of the recipe (measured on the development corpus; see the tests)."""

    step_s: float = 2.5
    """Segmentation windows (10 s) start every ``step_s``."""
    piece_s: float = 3.0
    """Local speaker tracks are cut into pieces of about this much speech, embedded one by one."""
    min_piece_s: float = 0.25
    """Pieces with less speech get no embedding (and no speaker)."""
    min_cluster_s: float = 1.0
    """Only pieces with at least this much speech define the clusters; shorter ones are just assigned."""
    exclude_overlap: bool = True
    """Embed only the frames with one speaker, when enough remain."""
    clustering: ClusteringParams = ClusteringParams()
    turns: TurnRules = TurnRules()
    naming_threshold: float = NAMING_THRESHOLDS["campplus"]
    """Cosine similarity a cluster centroid needs with a known speaker's reference to take its name."""

    @classmethod
    def for_embedder(cls, name: str, **overrides: Any) -> DiarizationParams:
        """The defaults with the clustering threshold measured for embedder ``name``."""
        clustering = ClusteringParams(threshold=THRESHOLDS.get(name, ClusteringParams().threshold),
                                      spectral_from=SPECTRAL_FROM)
        naming = NAMING_THRESHOLDS.get(name, cls.naming_threshold)
        return replace(cls(clustering=clustering, naming_threshold=naming), **overrides)

    @classmethod
    def from_settings(cls, settings: DiarizationConfig, embedder: str | None = None) -> DiarizationParams:
        """The parameters the ``diarization`` settings give for ``embedder`` (default: theirs): its measured
        clustering and naming thresholds unless the settings fix them, and the settings' segmentation step."""
        params = cls.for_embedder(embedder or settings.embedder, step_s=settings.step_s)
        if settings.naming_threshold is not None:
            params = replace(params, naming_threshold=settings.naming_threshold)
        if settings.threshold is None:
            return params
        return replace(params, clustering=replace(params.clustering, threshold=settings.threshold))


@dataclass(frozen=True)
class DiarizeOptions:
    """Per-request options of one diarization."""

    count: SpeakerCount = SpeakerCount()
    max_duration_s: float | None = None
    known_speakers: tuple[KnownSpeaker, ...] = ()
    """Enrolled voices (:meth:`Diarizer.enroll`): a cluster that matches one well enough takes its name."""

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for bad options."""
        self.count.validate()
        check_known(self.known_speakers)


@dataclass(frozen=True)
class DiarizedVoices:
    """A diarization and the unit centroid embedding of each of its speakers (by label)."""

    diarization: Diarization
    voices: dict[str, Float32Array]


@dataclass
class _Clock:
    """Wall time per stage, and progress over the stages."""

    hook: ProgressHook | None
    total_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    done: float = 0.0
    _started: float = field(default_factory=time.perf_counter)

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.stages[name] = now - self._started
        self._started = now
        self.done += STAGE_SHARE.get(name, 0.0)
        if self.hook is not None and name in STAGE_SHARE:
            self.hook(min(self.total_s, self.done * self.total_s), self.total_s)


@dataclass(frozen=True)
class _Segmented:
    plan: WindowPlan
    activity: Float32Array  # (windows, frames, local speakers)


@dataclass(frozen=True)
class _Pieces:
    pieces: list[Piece]
    embeddings: Float32Array  # (pieces, D), NaN rows: not embedded
    speech: np.ndarray  # seconds of speech behind each embedding


class Diarizer:
    """Diarizes files with the engine's shared segmentation and embedding services."""

    def __init__(
        self,
        segmentation: SegmentationService,
        embedder: EmbeddingService,
        executor: BlockingExecutor,
        params: DiarizationParams = DiarizationParams(),
        priority: Priority = Priority.OFFLINE,
    ) -> None:
        self.segmentation = segmentation
        self.embedder = embedder
        self.executor = executor
        self.params = params
        self.priority = priority

    async def run(self, source: Any, options: DiarizeOptions = DiarizeOptions(), progress: ProgressHook | None = None) -> Diarization:
        """Diarize ``source`` (path, bytes or binary file object, or a 16 kHz float32 array)."""
        return (await self.run_with_voices(source, options, progress)).diarization

    async def run_with_voices(self, source: Any, options: DiarizeOptions = DiarizeOptions(),
                              progress: ProgressHook | None = None) -> DiarizedVoices:
        """:meth:`run`, with each speaker's centroid embedding (to compare with enrolled voices)."""
        options.validate()
        check_known(options.known_speakers, self.embedder.info.name, self.embedder.info.dim)
        clock = _Clock(progress)
        audio = await self._decode(source, options)
        clock.total_s = len(audio) / SAMPLE_RATE
        clock.stage("decode")
        segmented = await self._segment(audio)
        clock.stage("segmentation")
        pieces = await self._embed(audio, segmented)
        clock.stage("embeddings")
        labels, centroids = await self.executor.run(self._cluster, pieces, options.count)
        names = self._names(centroids, options.known_speakers)
        clock.stage("clustering")
        turns, label_of = self._turns(segmented, pieces, labels, len(centroids), len(audio), names)
        clock.stage("turns")
        stats = DiarizationStats(
            wall_s=sum(clock.stages.values()), stages=tuple(clock.stages.items()),
            windows=len(segmented.plan.starts), embeddings=int(np.sum(pieces.speech > 0)),
        )
        result = Diarization(turns=turns, speakers=tuple(label_of.values()), duration=len(audio), stats=stats)
        return DiarizedVoices(result, {label: centroids[g] for g, label in label_of.items()})

    async def _decode(self, source: Any, options: DiarizeOptions) -> Float32Array:
        if isinstance(source, np.ndarray):
            audio = np.ascontiguousarray(source, dtype=np.float32)
        else:
            audio = await self.executor.run(decode_audio, source, max_duration_s=options.max_duration_s)
        if len(audio) == 0:
            raise InvalidInput("the audio holds no samples", param="file", code="empty_audio")
        return audio

    async def _segment(self, audio: Float32Array) -> _Segmented:
        info = self.segmentation.info
        window_frames = 1 + (info.window_samples - info.frame_size) // info.frame_step
        plan = plan_windows(len(audio), info.window_samples, int(self.params.step_s * SAMPLE_RATE), info.frame_step, window_frames)
        windows = [audio[s * info.frame_step : s * info.frame_step + info.window_samples] for s in plan.starts]
        activity = await self.segmentation.segment(windows, self.priority)
        frames = min(a.shape[0] for a in activity)
        plan = replace(plan, window_frames=frames)
        return _Segmented(plan, np.stack([a[:frames] for a in activity]))

    async def _embed(self, audio: Float32Array, seg: _Segmented) -> _Pieces:
        """Cut local speaker tracks into pieces and embed each (its overlapped frames left out when enough
        remain); pieces with too little speech keep a NaN embedding."""
        info = self.segmentation.info
        p = self.params
        frames_per_s = SAMPLE_RATE / info.frame_step
        pieces = cut_pieces(seg.activity, round(p.piece_s * frames_per_s), round(p.min_piece_s * frames_per_s))
        min_samples = max(self.embedder.info.min_samples, int(p.min_piece_s * SAMPLE_RATE))
        jobs: list[int] = []
        clips: list[Float32Array] = []
        for i, piece in enumerate(pieces):
            clip = piece_clip(audio, seg.plan.starts[piece.window] * info.frame_step, piece.frames,
                              seg.activity[piece.window], info, min_samples, p.exclude_overlap)
            if clip is not None:
                jobs.append(i)
                clips.append(clip)
        embeddings = np.full((len(pieces), self.embedder.info.dim), np.nan, dtype=np.float32)
        speech = np.zeros(len(pieces), dtype=np.float32)
        vectors = await self.embedder.embed(clips, self.priority) if clips else []
        for i, clip, e in zip(jobs, clips, vectors, strict=True):
            embeddings[i] = e
            speech[i] = len(clip) / SAMPLE_RATE
        return _Pieces(pieces, embeddings, speech)

    async def enroll(self, name: str, source: Any, max_duration_s: float = MAX_REFERENCE_S) -> KnownSpeaker:
        """A known speaker from a reference clip of one voice: its speech found by the segmentation model,
        cut into pieces and embedded as diarization embeds them, the pieces' unit mean as its voice.

        Raises:
            InvalidInput: not audio, longer than ``max_duration_s``, or under 1 s of speech (param
            ``known_speaker_references``).
        """
        param = "known_speaker_references"
        try:
            audio = await self._decode(source, DiarizeOptions(max_duration_s=max_duration_s))
        except InvalidInput as exc:
            raise InvalidInput(f"the reference of {name!r}: {exc.message}", param=param, code=exc.code) from None
        if len(audio) > max_duration_s * SAMPLE_RATE:
            raise InvalidInput(f"the reference of {name!r} is longer than {max_duration_s:g} s", param=param,
                               code="reference_too_long")
        pieces = await self._embed(audio, await self._segment(audio))
        speech_s = float(pieces.speech.sum())
        if speech_s < MIN_REFERENCE_SPEECH_S:
            raise InvalidInput(f"the reference of {name!r} holds {speech_s:.1f} s of speech; at least "
                               f"{MIN_REFERENCE_SPEECH_S:g} s is needed", param=param, code="reference_too_short")
        embedded = pieces.speech > 0
        centroid = centroids_of(pieces.embeddings[embedded], np.zeros(int(embedded.sum()), dtype=np.int64))[0]
        return KnownSpeaker(name, centroid, self.embedder.info.name, speech_s)

    def _names(self, centroids: Float32Array, known: tuple[KnownSpeaker, ...]) -> dict[int, str]:
        if not known:
            return {}
        sims = similarities(centroids, known)
        return match_names(sims, [k.name for k in known], self.params.naming_threshold)

    def _cluster(self, pieces: _Pieces, count: SpeakerCount) -> tuple[np.ndarray, Float32Array]:
        """Cluster the pieces with enough speech (all embedded ones when none has enough), then give every
        embedded piece its nearest centroid; returns the labels (-1: none) and the clusters' centroids."""
        has = ~np.isnan(pieces.embeddings).any(axis=1)
        if not has.any():
            return np.full(len(pieces.pieces), -1, dtype=np.int64), np.zeros((0, pieces.embeddings.shape[1]), np.float32)
        chosen = np.flatnonzero(has & (pieces.speech >= self.params.min_cluster_s))
        if len(chosen) == 0:
            chosen = np.flatnonzero(has)
        apart = cannot_link([pieces.pieces[i] for i in chosen])
        labels = cluster_embeddings(pieces.embeddings[chosen], self.params.clustering, count, apart)
        centroids = centroids_of(pieces.embeddings[chosen], labels)
        return nearest_centroid(pieces.embeddings, centroids), centroids

    def _turns(self, seg: _Segmented, pieces: _Pieces, labels: np.ndarray, k: int, n_samples: int,
               names: dict[int, str]) -> tuple[tuple[SpeakerTurn, ...], dict[int, str]]:
        """In each frame, the ``count`` speakers whose pieces are most active over the windows."""
        info = self.segmentation.info
        windows, frames, _ = seg.activity.shape
        count = speaker_count(seg.activity, seg.plan)
        scores = aggregate(piece_activity(pieces.pieces, labels, windows, frames, k), seg.plan)
        binary = top_speakers(scores, np.minimum(count, k))
        return label_spans(turn_spans(binary, info.frame_step, info.frame_size, n_samples, self.params.turns), names)


def piece_clip(
    audio: Float32Array,
    window_start: int,
    frames: np.ndarray,
    window_activity: Float32Array,
    info: SegmentationInfo,
    min_samples: int,
    exclude_overlap: bool = True,
) -> Float32Array | None:
    """The samples of a piece's frames (only those where its speaker speaks alone, when that leaves at least
    ``min_samples``), joined; None when fewer than ``min_samples`` remain."""
    if exclude_overlap:
        alone = frames[window_activity[frames].sum(axis=1) == 1]
        if len(alone) * info.frame_step >= min_samples:
            frames = alone
    offset = window_start + info.frame_size // 2 - info.frame_step // 2
    starts = np.clip(offset + frames * info.frame_step, 0, len(audio))
    idx = (starts[:, None] + np.arange(info.frame_step)[None, :]).ravel()
    idx = idx[idx < len(audio)]
    if len(idx) < min_samples:
        return None
    return np.ascontiguousarray(audio[idx], dtype=np.float32)
