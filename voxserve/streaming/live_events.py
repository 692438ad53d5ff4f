"""Events of a live transcription stream (times are sample indices on the stream's timeline)."""

from __future__ import annotations

from dataclasses import dataclass

from voxserve.types import TokenLogprob, samples_to_s


@dataclass(frozen=True)
class SpeechStarted:
    """Speech began; ``start`` includes the prefix padding."""

    item_id: str
    start: int

    @property
    def start_ms(self) -> int:
        """Start in milliseconds."""
        return int(samples_to_s(self.start) * 1000)


@dataclass(frozen=True)
class SpeechStopped:
    """Speech ended at ``end`` (after the silence that confirmed it, minus that silence)."""

    item_id: str
    end: int

    @property
    def end_ms(self) -> int:
        """End in milliseconds."""
        return int(samples_to_s(self.end) * 1000)


@dataclass(frozen=True)
class Committed:
    """The utterance's audio is final and queued for recognition."""

    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class Cleared:
    """Uncommitted audio was dropped."""


@dataclass(frozen=True)
class Partial:
    """A revisable hypothesis of the utterance's audio up to ``end``."""

    item_id: str
    text: str
    end: int = 0

    @property
    def end_ms(self) -> int:
        """End of the audio it covers, in milliseconds."""
        return int(samples_to_s(self.end) * 1000)


@dataclass(frozen=True)
class TranscriptDelta:
    """Append-only text of an utterance (words two hypotheses agreed on, then the final remainder)."""

    item_id: str
    delta: str


@dataclass(frozen=True)
class TranscriptCompleted:
    """The final text of an utterance; ``latency_s`` runs from the end of speech (or commit) to now;
    ``speaker`` is set when the stream labels speakers (see :mod:`live_speakers`); ``logprobs``: the text's
    tokens when the stream asked for them (``LiveOptions.logprobs``)."""

    item_id: str
    text: str
    start: int
    end: int
    latency_s: float
    speaker: str | None = None
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class TranscriptFailed:
    """Recognition of one utterance failed; the stream goes on."""

    item_id: str
    message: str


@dataclass(frozen=True)
class StreamError:
    """A request on the stream could not be done (e.g. committing an empty buffer); the stream goes on.
    ``event_id``: the client's id of the request, echoed in the error (OpenAI clients match errors by it)."""

    code: str
    message: str
    event_id: str | None = None


LiveEvent = (
    SpeechStarted | SpeechStopped | Committed | Cleared | Partial | TranscriptDelta | TranscriptCompleted
    | TranscriptFailed | StreamError
)
