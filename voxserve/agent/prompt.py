"""The agent's prompt: instructions, the conversation history under a token budget, and retrieved facts right
before the user's question.

A 135M-parameter model answers from facts reliably only when the facts are short, sit right next to the
question, and the system prompt tells it to repeat the fact that answers (measured: 7 of 7 probes with this
layout against 4 of 7 without the rule; see the agent benchmark). The system prompt and history come first
and stay stable from turn to turn, so llama.cpp's prefix cache prefills only the new turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from voxserve.errors import InvalidInput

Role = Literal["system", "user", "assistant"]
DEFAULT_INSTRUCTIONS = "You are a helpful voice assistant."
GROUNDING_RULE = ("Reply with one or two short spoken sentences, without lists or markdown. When facts are given, "
                  "repeat the fact that answers the question word for word.")


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat prompt."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        """The OpenAI / llama.cpp wire shape."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class PromptParams:
    """How the prompt is assembled.

    Attributes:
        instructions: the system prompt (the session's ``instructions``).
        grounding_rule: appended to the instructions: how to use the facts (empty to leave it out).
        history_tokens: the most tokens of earlier messages kept (the oldest go first).
        max_fact_chars: the most characters of retrieved facts in one prompt.
        history_facts: earlier user messages keep their facts as sent (the LLM's prefix cache then covers
            the whole history; a small model may copy old facts, so keep the history short with it).
    """

    instructions: str = DEFAULT_INSTRUCTIONS
    grounding_rule: str = GROUNDING_RULE
    history_tokens: int = 768
    max_fact_chars: int = 900
    history_facts: bool = True

    def __post_init__(self) -> None:
        if self.history_tokens < 0 or self.max_fact_chars < 0:
            raise InvalidInput("prompt budgets must not be negative", param="history_tokens")


@dataclass
class Exchange:
    """One numbered user turn and the assistant's reply to it (empty until there is one).

    ``sent`` is the user message as the LLM saw it (with its facts). Later prompts repeat it verbatim, so the
    LLM's prefix cache still holds the whole conversation up to the new turn and only that is prefilled
    (about 130-280 tokens per second on one CPU core), and a follow-up question still sees its facts.
    """

    number: int
    user: str
    assistant: str = ""
    sent: str = ""


@dataclass
class History:
    """The conversation as the LLM sees it: exchanges in order, and what fits in a token budget."""

    exchanges: list[Exchange] = field(default_factory=list)

    def question(self, text: str) -> str:
        """What a reply to a new user turn ``text`` answers: joined to an unanswered user turn before it."""
        if self.exchanges and not self.exchanges[-1].assistant:
            return f"{self.exchanges[-1].user} {text}".strip()
        return text

    def add_user(self, text: str) -> Exchange:
        """A new user turn (a turn that follows a user turn without a reply joins it)."""
        if self.exchanges and not self.exchanges[-1].assistant:
            last = self.exchanges[-1]
            last.user, last.sent = f"{last.user} {text}".strip(), ""
            return last
        exchange = Exchange(len(self.exchanges), text)
        self.exchanges.append(exchange)
        return exchange

    def add_assistant(self, text: str, sent: str = "") -> Exchange:
        """The reply to the latest user turn (a reply without one starts an exchange of its own); ``sent`` is
        that turn's message as the LLM saw it."""
        if not self.exchanges or self.exchanges[-1].assistant:
            self.exchanges.append(Exchange(len(self.exchanges), ""))
        last = self.exchanges[-1]
        last.assistant = text
        if sent and last.user:
            last.sent = sent
        return last

    def window(self, budget: int, count_tokens: Callable[[str], int]) -> list[Exchange]:
        """The latest exchanges whose messages fit in ``budget`` tokens (whole exchanges, oldest dropped)."""
        kept: list[Exchange] = []
        used = 0
        for exchange in reversed(self.exchanges):
            cost = count_tokens(exchange.sent or exchange.user) + count_tokens(exchange.assistant) + 10  # + template
            # (counted with its facts either way: a budget that does not depend on the layout)
            if used + cost > budget:
                break
            kept.append(exchange)
            used += cost
        return kept[::-1]


def facts_block(facts: Sequence[str], max_chars: int) -> str:
    """The facts as one block, least relevant first so that the best one sits right before the question;
    facts that do not fit in ``max_chars`` (the least relevant) are left out."""
    kept: list[str] = []
    used = 0
    for fact in facts:  # best first
        if used + len(fact) > max_chars and kept:
            break
        kept.append(fact)
        used += len(fact)
    return "\n".join(reversed(kept))


def build_messages(
    params: PromptParams,
    history: Sequence[Exchange],
    question: str,
    facts: Sequence[str] = (),
) -> list[ChatMessage]:
    """The chat messages of one reply: system, earlier exchanges, then the question with its facts.

    ``history`` excludes the exchange being answered; ``facts`` are best first.
    """
    system = " ".join(s for s in (params.instructions.strip(), params.grounding_rule.strip()) if s)
    messages = [ChatMessage("system", system)] if system else []
    for exchange in history:
        if exchange.user:
            sent = exchange.sent if params.history_facts else ""
            messages.append(ChatMessage("user", sent or exchange.user))
        if exchange.assistant:
            messages.append(ChatMessage("assistant", exchange.assistant))
    block = facts_block(facts, params.max_fact_chars)
    content = f"Facts: {block}\n\nQuestion: {question}" if block else question
    messages.append(ChatMessage("user", content))
    return messages
