"""Events of an agent session (times are sample indices on the input stream's 16 kHz timeline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from voxserve.errors import VoxserveError
from voxserve.types import SynthesisChunk

ResponseStatus = Literal["completed", "cancelled", "failed"]


@dataclass(frozen=True)
class ReplyLatency:
    """From the end of the user's speech to the first audio of the reply, and its parts (seconds).

    The parts overlap when the reply was drafted during the silence (``speculative``), so they need not add
    up to ``total_s``.

    Attributes:
        total_s: end of speech -> first reply audio sent.
        end_of_turn_s: end of speech -> end of turn decided.
        asr_s: the last utterance cut -> its final transcript.
        llm_ttft_s: LLM request -> first token.
        tts_ttfb_s: first text to the synthesizer -> first audio.
        retrieval_s: prompt building, with the retrieval embedding.
        speculative: the reply was drafted before the end of turn and released at it.
    """

    total_s: float
    end_of_turn_s: float
    asr_s: float
    llm_ttft_s: float
    tts_ttfb_s: float
    retrieval_s: float
    speculative: bool

    def as_dict(self) -> dict[str, float | bool]:
        """Milliseconds, for ``response.done`` and reports."""
        ms: dict[str, float | bool] = {
            f"{k[:-2]}_ms": round(v * 1000, 1) for k, v in self.__dict__.items() if isinstance(v, float)
        }
        return {**ms, "speculative": self.speculative}


@dataclass(frozen=True)
class UserSpeechStarted:
    """The user began a turn (also what interrupts a reply)."""

    item_id: str
    start: int


@dataclass(frozen=True)
class UserTurnEnded:
    """The user's turn is over; ``transcript`` is empty when the speech held no words (no item is made)."""

    item_id: str
    previous_item_id: str | None
    end: int
    transcript: str
    voice: bool = True


@dataclass(frozen=True)
class ItemAdded:
    """A text message joined the conversation (``conversation.item.create``)."""

    item_id: str
    previous_item_id: str | None
    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class ResponseStarted:
    """A reply became audible: its assistant item is ``item_id``."""

    response_id: str
    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class ResponseAudio:
    """A chunk of the reply's audio; ``text_delta`` is the text this chunk starts to speak ('' if none)."""

    response_id: str
    item_id: str
    chunk: SynthesisChunk
    text_delta: str


@dataclass(frozen=True)
class ResponseDone:
    """A reply ended. ``transcript`` is what was said (truncated to what was heard when interrupted)."""

    response_id: str
    item_id: str
    status: ResponseStatus
    transcript: str
    audio_s: float
    reason: str | None = None
    latency: ReplyLatency | None = None
    error: VoxserveError | None = None


@dataclass(frozen=True)
class ItemTruncated:
    """An assistant item was cut at ``audio_end_ms``; ``transcript`` is what remains."""

    item_id: str
    audio_end_ms: int
    transcript: str


@dataclass(frozen=True)
class InputCleared:
    """Uncommitted input audio was dropped."""


@dataclass(frozen=True)
class AgentError:
    """Something failed that does not end the session (a transcription, the LLM, a bad request)."""

    error: VoxserveError


AgentEvent = (
    UserSpeechStarted | UserTurnEnded | ItemAdded | ResponseStarted | ResponseAudio | ResponseDone | ItemTruncated
    | InputCleared | AgentError
)
