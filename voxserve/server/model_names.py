"""OpenAI's model names, as data: which local model serves each (``server.model_aliases`` overrides).

Clients send their own defaults (gpt-4o-transcribe, gpt-4o-mini-tts, gpt-realtime, ...); each maps to what
this server runs. Speech and Realtime names are accepted and listed; the voice (``tts.voice``) and the agent
(``agent.*``) decide what answers them.
"""

from __future__ import annotations

from voxserve.config import Settings

TRANSCRIPTION = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "gpt-transcribe", "gpt-realtime-whisper",
                 "gpt-4o-transcribe-diarize", "gpt-4o-mini-transcribe-2025-03-20", "gpt-4o-transcribe-2025-03-20")
"""OpenAI's transcription and translation models: served by ``asr.model`` unless an alias says otherwise."""
SPEECH = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-03-20")
"""OpenAI's speech models: spoken by the requested (or default) voice."""
REALTIME = ("gpt-realtime", "gpt-realtime-2.1", "gpt-realtime-mini", "gpt-4o-realtime-preview",
            "gpt-4o-mini-realtime-preview")
"""OpenAI's Realtime conversation models: answered by the voice agent."""


def asr_model(settings: Settings, name: str) -> str | None:
    """The local recogniser for a requested model name (None = the default, ``asr.model``)."""
    configured = settings.server.model_aliases.get(name)
    if configured:
        return configured
    return None if name in TRANSCRIPTION else name


def is_alias(name: str) -> bool:
    """Whether ``name`` is one of OpenAI's model names."""
    return name in TRANSCRIPTION or name in SPEECH or name in REALTIME


def maps_to(settings: Settings, name: str) -> str:
    """What serves an OpenAI model name (for /v1/models)."""
    if name in SPEECH:
        return f"voice:{settings.tts.voice or 'default'}"
    if name in REALTIME:
        return "voxserve-agent"
    return asr_model(settings, name) or settings.asr.model
