"""Options of an agent session and the observer of its metrics."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from voxserve.agent.context import RetrievalParams
from voxserve.agent.events import ReplyLatency
from voxserve.agent.llm import LlmOptions
from voxserve.agent.prompt import PromptParams
from voxserve.agent.turn import TurnParams
from voxserve.pipelines.guard import GuardConfig
from voxserve.pipelines.vad import VadParams
from voxserve.streaming.live_asr import LiveOptions
from voxserve.text.keyterms import parse_keyterms
from voxserve.types import Priority


@dataclass(frozen=True)
class AgentOptions:
    """Per-session options (a Realtime ``session.update`` maps onto these).

    Attributes:
        prompt: instructions and prompt budgets.
        turn: server-side turn taking, or None: the client commits audio and asks for each response.
        vad_threshold: speech probability threshold.
        prefix_padding_ms: audio kept before detected speech.
        cut_ms: a pause this long ends an utterance, which is then transcribed while the turn may go on.
        language: the user's language (None: detected per utterance).
        asr_prompt: words recognition should favour (names, jargon), comma-separated; None: the knowledge's
            key terms.
        partial_interval_ms: partial hypotheses of long utterances for the turn check (0: none).
        voice: the TTS voice (None: the default).
        llm: generation options.
        retrieval: how many passages reach the prompt.
        first_segment_wait_s: how long after the LLM's first token the reply's first words are synthesized
            even without a clause end (see :class:`~voxserve.agent.reply.ReplyParts`).
        guard: the hallucination guard of the turns' recogniser (the server passes its process settings).
    """

    prompt: PromptParams = field(default_factory=PromptParams)
    turn: TurnParams | None = field(default_factory=TurnParams)
    vad_threshold: float = 0.5
    prefix_padding_ms: int = 300
    cut_ms: int = 150
    language: str | None = "en"
    asr_prompt: str | None = None
    partial_interval_ms: int = 0
    voice: str | None = None
    llm: LlmOptions = field(default_factory=LlmOptions)
    retrieval: RetrievalParams = field(default_factory=RetrievalParams)
    first_segment_wait_s: float = 0.05
    guard: GuardConfig = field(default_factory=GuardConfig)

    def live_options(self, keyterms: tuple[str, ...] = ()) -> LiveOptions:
        """The live stream's options: VAD cuts at ``cut_ms`` pauses, finals at agent priority; ``keyterms``
        (when ``asr_prompt`` is None) lead the recogniser's prompt."""
        base = LiveOptions()
        vad = None
        if self.turn is not None:
            vad = VadParams(threshold=self.vad_threshold, min_speech_ms=100, min_silence_ms=self.cut_ms)
        return replace(base, vad=vad, prefix_padding_ms=self.prefix_padding_ms if vad else 0,
                       decode=replace(base.decode, language=self.language),
                       keyterms=parse_keyterms([self.asr_prompt]) if self.asr_prompt is not None else keyterms,
                       partial_interval_ms=self.partial_interval_ms, priority=Priority.AGENT, guard=self.guard)


class AgentObserver(Protocol):
    """Receives agent metrics (called on the event loop; must not block)."""

    def on_reply_latency(self, latency: ReplyLatency) -> None:
        """A voice turn's reply started to play."""
        ...

    def on_response_done(self, status: str) -> None:
        """A response ended (completed, cancelled or failed)."""
        ...

    def on_interruption(self) -> None:
        """The user interrupted a reply."""
        ...
