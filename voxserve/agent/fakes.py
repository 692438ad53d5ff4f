"""Deterministic fakes of the agent's seams (LLM, text embedder, blocking chat model), for tests and demos of
orchestration: scripted replies with a time to first token and a pace, and recordings of every request.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import zlib
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from voxserve.agent.llm import LlmOptions, LlmUnavailable
from voxserve.agent.prompt import ChatMessage
from voxserve.backends.checks import check_chat
from voxserve.errors import BackendError
from voxserve.types import Float32Array

ReplyScript = Callable[[Sequence[ChatMessage]], str]


@dataclass
class FakeLlm:
    """Implements :class:`~voxserve.agent.llm.LlmClient`: says ``reply`` (or ``reply(messages)``) word by
    word, the first word ``ttft_s`` after the request and each next one ``word_s`` later; ``fail`` raises
    :class:`LlmUnavailable` instead. Records each request's messages and how many streams were cancelled."""

    reply: str | ReplyScript = "Hello there, this is a fake reply."
    ttft_s: float = 0.05
    word_s: float = 0.01
    fail: bool = False
    requests: list[list[ChatMessage]] = field(default_factory=list)
    cancelled: int = 0
    active: int = 0

    @property
    def name(self) -> str:
        """``fake-llm``."""
        return "fake-llm"

    def count_tokens(self, text: str) -> int:
        """One token per word."""
        return len(text.split())

    async def stream(self, messages: Sequence[ChatMessage], options: LlmOptions) -> AsyncGenerator[str, None]:
        """The scripted reply, paced."""
        self.requests.append(list(messages))
        self.active += 1
        finished = False
        try:
            await asyncio.sleep(self.ttft_s)
            if self.fail:
                raise LlmUnavailable("the fake LLM is down")
            text = self.reply(messages) if callable(self.reply) else self.reply
            for i, word in enumerate(text.split(" ")[: options.max_tokens]):
                if i:
                    await asyncio.sleep(self.word_s)
                yield word if i == 0 else " " + word
            finished = True
        finally:
            self.active -= 1
            if not finished and not self.fail:
                self.cancelled += 1

    async def aclose(self) -> None:
        """Nothing to release."""

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class FakeChatModel:
    """A blocking chat model like ``LlamaChatModel``: yields ``pieces`` every ``piece_s`` seconds and records
    how many pieces it made before it was told to stop. Like the real model it refuses malformed requests
    (InvalidInput) and prompts longer than ``context_tokens`` (BackendError), before the first piece."""

    pieces: Sequence[str] = ("One", " two", " three", " four", " five.")
    piece_s: float = 0.01
    name: str = "fake-chat"
    context_tokens: int = 2048
    produced: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)

    def count_tokens(self, text: str) -> int:
        """One token per word."""
        return len(text.split())

    def stream_chat(self, messages: Sequence[dict[str, str]], max_tokens: int, temperature: float,
                    should_stop: Callable[[], bool]) -> Iterator[str]:
        """The pieces, paced, until ``should_stop``."""
        check_chat(messages, max_tokens, temperature)
        prompt = sum(self.count_tokens(m["content"]) + 4 for m in messages)  # + role and separators, as a template adds
        if prompt > self.context_tokens:
            raise BackendError(f"the fake LLM failed: requested tokens ({prompt}) exceed context window of "
                               f"{self.context_tokens}")
        for piece in list(self.pieces)[:max_tokens]:
            if should_stop():
                self.stopped.set()
                return
            time.sleep(self.piece_s)
            self.produced += 1
            yield piece


_TOKEN = re.compile(r"[a-z0-9]+")


class FakeTextEmbedder:
    """Implements ``TextEmbedder`` with hashed bags of words (texts sharing words are similar)."""

    dim = 256

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Float32Array:
        """Unit-length hashed word counts (words of one or two letters ignored)."""
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for word in _TOKEN.findall(text.lower()):
                if len(word) > 2:
                    out[row, zlib.crc32(word.rstrip("s").encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, 1e-9), dtype=np.float32)
