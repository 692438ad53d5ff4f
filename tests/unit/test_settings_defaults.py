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
