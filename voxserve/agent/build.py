"""Builds the agent from the process settings: the LLM (embedded or by URL), the text embedder and knowledge
index when retrieval is on, and the default session options. Blocking (models load): call it off the loop.
"""

from __future__ import annotations

import logging

from voxserve.agent.cascade import Agent
from voxserve.agent.context import KnowledgeBase, RetrievalParams, TextEmbedder
from voxserve.agent.llm import EmbeddedLlm, HttpChatLlm, LlmClient, LlmOptions
from voxserve.agent.options import AgentOptions
from voxserve.agent.prompt import PromptParams
from voxserve.agent.turn import TurnParams
from voxserve.backends.registry import load_live_vad
from voxserve.backends.vad.pool import VadPool
from voxserve.config import AgentConfig
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import Recognizer
from voxserve.streaming.tts_service import TtsService

log = logging.getLogger(__name__)


def build_llm(config: AgentConfig) -> LlmClient:
    """The configured LLM: an OpenAI-compatible endpoint when ``llm_url`` is set, else the embedded model.

    Raises:
        ModelUnavailable: the embedded model or its runtime is not installed.
    """
    if config.llm_url:
        return HttpChatLlm(config.llm_url, config.llm_model, config.llm_api_key, config.llm_timeout_s)
    from voxserve.backends.asr.embedded import cache_dir
    from voxserve.backends.llm.llama_cpp import LlamaChatModel, LlamaConfig

    model = LlamaChatModel(LlamaConfig(config.llm_model, config.llm_context_tokens, config.llm_threads),
                           cache_dir=cache_dir())
    return EmbeddedLlm(model)


def build_retrieval(config: AgentConfig) -> tuple[TextEmbedder | None, KnowledgeBase | None]:
    """The text embedder and the knowledge index (None, None when retrieval is off)."""
    if not config.knowledge_dir and not config.embed_conversation:
        return None, None
    from voxserve.backends.text.minilm import MiniLmEmbedder

    embedder = MiniLmEmbedder()
    knowledge = KnowledgeBase.build(config.knowledge_dir, embedder) if config.knowledge_dir else None
    return embedder, knowledge


def build_agent(config: AgentConfig, asr: Recognizer, executor: BlockingExecutor, tts: TtsService,
                vads: VadPool | None = None) -> Agent:
    """The agent over the engine's shared recogniser, executor, synthesis service and live VADs (a pool of
    its own when None) (blocking)."""
    llm = build_llm(config)
    embedder, knowledge = build_retrieval(config)
    warm_up(config, llm, tts, embedder)
    log.info("agent ready: LLM %s, knowledge %s", llm.name,
             f"{len(knowledge.passages)} passages" if knowledge else "none")
    return Agent(asr, vads if vads is not None else VadPool(load_live_vad), executor, tts, llm, embedder, knowledge)


def warm_up(config: AgentConfig, llm: LlmClient, tts: TtsService, embedder: TextEmbedder | None) -> None:
    """Load the voice and run each model once, so the first turn pays no lazy initialisation (blocking)."""
    tts.pool.voice(config.voice or None)
    if embedder is not None:
        embedder.embed(["warm up"])
    if isinstance(llm, EmbeddedLlm):
        llm.warm_up(" ".join((config.instructions, PromptParams().grounding_rule)))


def default_options(config: AgentConfig) -> AgentOptions:
    """Session options from the settings (a Realtime ``session.update`` refines them)."""
    return AgentOptions(
        prompt=PromptParams(instructions=config.instructions, history_tokens=config.history_tokens),
        turn=TurnParams(silence_ms=config.silence_ms, incomplete_silence_ms=config.incomplete_silence_ms,
                        speculate=config.speculative),
        cut_ms=config.cut_silence_ms,
        language=config.language or None,
        voice=config.voice or None,
        llm=LlmOptions(max_tokens=config.max_output_tokens, temperature=config.temperature),
        retrieval=RetrievalParams(top_k=config.top_k, min_score=config.min_score),
    )
