"""Every default is written once: where a pipeline's options mirror a settings section, both say the same
(and the options are built from the settings by ``from_settings``)."""

from __future__ import annotations

from dataclasses import fields

from voxserve.config import ChunkSettings, DiarizationConfig, GuardSettings
from voxserve.engine.speaker_pool import SpeakerModelsConfig
from voxserve.pipelines.chunking import ChunkParams
from voxserve.pipelines.guard import GuardConfig


def test_guard_options_and_settings_agree() -> None:
    shared = [f.name for f in fields(GuardConfig) if f.name in GuardSettings.model_fields]
    assert len(shared) >= 8
    assert GuardConfig.from_settings(GuardSettings()) == GuardConfig()
    changed = GuardConfig.from_settings(GuardSettings(min_avg_logprob=-2.0, enabled=False))
    assert (changed.min_avg_logprob, changed.enabled) == (-2.0, False)


def test_diarization_models_follow_the_settings() -> None:
    d = DiarizationConfig()
    models = SpeakerModelsConfig.from_settings(d)
    assert (models.embedder, models.max_batch_size, models.max_wait_ms) == (d.embedder, d.max_batch_size, d.max_wait_ms)


def test_chunking_options_and_settings_agree() -> None:
    assert ChunkParams.from_settings(ChunkSettings()) == ChunkParams()
    own = ChunkParams.from_settings(ChunkSettings(), vad=ChunkParams().vad.__class__(threshold=0.9))
    assert own.vad.threshold == 0.9


def test_long_file_options_and_settings_agree() -> None:
    from voxserve.backends.base import DecodeOptions
    from voxserve.config import Settings
    from voxserve.pipelines.long_asr import LongAsrOptions

    assert LongAsrOptions.from_settings(Settings(), DecodeOptions()) == LongAsrOptions()
    changed = LongAsrOptions.from_settings(Settings(asr={"beam_size": 4}, guard={"rechunk": False}), DecodeOptions())
    assert (changed.decode.beam_size, changed.rechunk) == (4, False)


def test_live_options_and_settings_agree() -> None:
    from voxserve.config import LiveConfig
    from voxserve.streaming.live_asr import LiveOptions

    assert LiveOptions.from_settings(LiveConfig(), GuardSettings()) == LiveOptions()
    changed = LiveOptions.from_settings(LiveConfig(partial_interval_ms=0, min_speech_ms=250), GuardSettings(enabled=False))
    assert changed.partial_interval_ms == 0 and changed.vad is not None and changed.vad.min_speech_ms == 250
    assert LiveOptions.from_settings(LiveConfig(follow_on_s=-1), GuardSettings()).follow_on_s is None
    assert not changed.guard.enabled


def test_recogniser_batching_and_placement_follow_the_settings() -> None:
    from voxserve.backends.base import AsrLoadOptions
    from voxserve.config import AsrConfig
    from voxserve.engine.batcher import BatcherConfig

    asr = AsrConfig(workers=1)
    assert BatcherConfig.from_settings(asr) == BatcherConfig()
    assert AsrLoadOptions.from_settings(asr) == AsrLoadOptions()
    ray = AsrLoadOptions.from_settings(AsrConfig(device="cuda", workers=2), workers=1, threads_per_worker=3)
    assert (ray.device, ray.workers, ray.threads_per_worker) == ("cuda", 1, 3)


def test_diarization_parameters_follow_the_settings() -> None:
    from voxserve.pipelines.diarization import DiarizationParams

    d = DiarizationConfig()
    assert DiarizationParams.from_settings(d) == DiarizationParams.for_embedder(d.embedder)
    fixed = DiarizationParams.from_settings(DiarizationConfig(threshold=0.5, step_s=5.0), "campplus")
    assert (fixed.clustering.threshold, fixed.step_s) == (0.5, 5.0)
