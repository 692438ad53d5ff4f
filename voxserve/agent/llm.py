"""LLM clients for the agent: the embedded llama.cpp model, or any OpenAI-compatible chat endpoint.

Both stream the reply as text pieces through ``async for piece in llm.stream(messages, options)``. Stopping
the iteration (``break``, ``aclose()``, or cancelling the task that iterates) cancels the generation: the
embedded model stops within one token, the HTTP request is closed. Blocking model code runs in the client's
own worker threads; each piece is handed to the event loop as soon as it is made (nothing lazy crosses the
thread boundary).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncGenerator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from voxserve.agent.prompt import ChatMessage
from voxserve.errors import BackendError, InvalidInput

log = logging.getLogger(__name__)
_END = object()


class LlmUnavailable(BackendError):
    """The LLM could not be reached or failed to answer (the conversation goes on without this reply)."""

    code = "llm_unavailable"


@dataclass(frozen=True)
class LlmOptions:
    """Per-reply generation options.

    Attributes:
        max_tokens: the longest reply (a spoken answer is a sentence or two).
        temperature: 0 for greedy decoding.
    """

    max_tokens: int = 80
    temperature: float = 0.0

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for bad values."""
        if not 1 <= self.max_tokens <= 4096:
            raise InvalidInput("max_output_tokens must be between 1 and 4096", param="max_output_tokens")
        if not 0.0 <= self.temperature <= 2.0:
            raise InvalidInput("temperature must be between 0 and 2", param="temperature")


class LlmClient(Protocol):
    """What the cascade needs of a chat model."""

    @property
    def name(self) -> str:
        """The model's name (for logs and ``response.done``)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (exact for the embedded model, estimated for endpoints)."""
        ...

    def stream(self, messages: Sequence[ChatMessage], options: LlmOptions) -> AsyncGenerator[str, None]:
        """The reply, piece by piece.

        Raises:
            LlmUnavailable: the model could not answer.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and threads."""
        ...

    def close(self) -> None:
        """Release threads (without a loop; at process end)."""
        ...


class EmbeddedLlm:
    """The embedded llama.cpp model (``voxserve.backends.llm.llama_cpp``), streamed from a worker thread."""

    def __init__(self, model: Any, workers: int = 1) -> None:
        self.model = model
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="voxserve-llm")

    @property
    def name(self) -> str:
        """The GGUF file's name."""
        return str(self.model.name)

    def count_tokens(self, text: str) -> int:
        """Exact token count (the tokenizer is fast and thread-safe)."""
        return int(self.model.count_tokens(text))

    async def stream(self, messages: Sequence[ChatMessage], options: LlmOptions) -> AsyncGenerator[str, None]:
        """Generate in a worker thread; pieces reach the loop one by one; stopping stops the thread."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        dicts = [m.as_dict() for m in messages]

        def deliver(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        def work() -> None:
            try:
                for piece in self.model.stream_chat(dicts, options.max_tokens, options.temperature, stop.is_set):
                    deliver(piece)
                deliver(_END)
            except Exception as exc:  # noqa: BLE001 - handed to the reader, who raises it
                deliver(exc)

        worker = loop.run_in_executor(self._threads, work)
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, BackendError):
                    raise LlmUnavailable(item.message)
                if isinstance(item, Exception):
                    raise LlmUnavailable(f"the embedded LLM failed: {type(item).__name__}: {item}")
                yield item
        finally:
            stop.set()
            worker.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieve it: the reader already saw any error

    def warm_up(self, system: str) -> None:
        """Generate one token after ``system`` (blocking): the first reply then finds the runtime initialised
        and the system prompt already in the prefix cache."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hello."}]
        for _ in self.model.stream_chat(messages, 1, 0.0, lambda: False):
            pass

    async def aclose(self) -> None:
        """Stop the worker threads (a generation in progress stops at its next token)."""
        self.close()

    def close(self) -> None:
        """Stop the worker threads."""
        self._threads.shutdown(wait=False, cancel_futures=True)


def chat_completions_url(url: str) -> str:
    """The chat-completions endpoint of a base URL (``http://host:8080``, ``.../v1`` or the full path)."""
    base = url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


class HttpChatLlm:
    """An OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, ...) with streaming (SSE)."""

    def __init__(self, url: str, model: str = "", api_key: str = "", timeout_s: float = 30.0,
                 transport: Any = None) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise InvalidInput(f"the LLM URL must start with http:// or https://, not {url!r}", param="llm_url")
        self.url = chat_completions_url(url)
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout_s, connect=5.0),
                                         transport=transport)  # a test transport, or the network

    @property
    def name(self) -> str:
        """The model name sent to the endpoint (or the endpoint's URL)."""
        return self.model or self.url

    def count_tokens(self, text: str) -> int:
        """An estimate: about four characters per token for English."""
        return len(text) // 4 + 1

    async def stream(self, messages: Sequence[ChatMessage], options: LlmOptions) -> AsyncGenerator[str, None]:
        """POST the chat with ``stream: true`` and yield each delta's content."""
        import httpx

        body: dict[str, Any] = {"messages": [m.as_dict() for m in messages], "stream": True,
                                "max_tokens": options.max_tokens, "temperature": options.temperature}
        if self.model:
            body["model"] = self.model
        try:
            async with self._client.stream("POST", self.url, json=body) as response:
                if response.status_code != 200:
                    detail = (await response.aread()).decode("utf-8", "replace")[:300]
                    raise LlmUnavailable(f"the LLM endpoint answered {response.status_code}: {detail}")
                async for line in response.aiter_lines():
                    piece = _sse_content(line)
                    if piece is None:
                        break
                    if piece:
                        yield piece
        except httpx.HTTPError as exc:
            raise LlmUnavailable(f"the LLM endpoint {self.url} is unreachable: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    def close(self) -> None:
        """Nothing without a loop: the pool's connections end with it."""


def _sse_content(line: str) -> str | None:
    """The text of one server-sent-events line of a chat stream: '' for anything without text, None at the end.

    Raises:
        LlmUnavailable: the endpoint sent an error or malformed data.
    """
    if not line.startswith("data:"):
        return ""
    data = line[5:].strip()
    if data == "[DONE]":
        return None
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        raise LlmUnavailable(f"the LLM endpoint sent malformed data: {data[:100]!r}") from None
    if not isinstance(event, dict):
        return ""
    if "error" in event:
        raise LlmUnavailable(f"the LLM endpoint failed: {str(event['error'])[:300]}")
    choices = event.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    delta = first.get("delta")
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""
