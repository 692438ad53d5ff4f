"""The agent cascade on scripted timelines with fake models: turn taking, speculative drafts, barge-in within one
audio frame, truncation to what was heard, manual turns, text turns, cancellation and a failing LLM.

Audio is pushed in 20 ms blocks paced at ``SPEED`` x real time; every event is stamped with the input position
(the session's clock) at which the client received it, so assertions on timing are exact in samples.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from voxserve.agent.cascade import Agent, AgentSession
from voxserve.agent.context import KnowledgeBase
from voxserve.agent.events import (
    AgentError,
    AgentEvent,
    ItemAdded,
    ItemTruncated,
    ResponseAudio,
    ResponseDone,
    ResponseStarted,
    UserSpeechStarted,
    UserTurnEnded,
)
from voxserve.agent.fakes import FakeLlm, FakeTextEmbedder
from voxserve.agent.options import AgentOptions
from voxserve.agent.prompt import ChatMessage
from voxserve.agent.turn import TurnParams
from voxserve.backends.base import VoiceEntry
from voxserve.backends.fakes import FakeAsr, FakeVad
from voxserve.backends.tts.catalog import VoiceCatalog
from voxserve.backends.tts.fakes import FakeAcoustic, FakeDecoder
from voxserve.engine.batcher import BatcherConfig, MicroBatcher
from voxserve.engine.executor import BlockingExecutor
from voxserve.engine.pool import AsrService
from voxserve.engine.tts_pool import VoicePool
from voxserve.errors import InvalidInput
from voxserve.streaming.tts import TtsStreamParams
from voxserve.streaming.tts_service import TtsService

RATE = 16000
BLOCK = 320  # 20 ms
FRAME = 512  # one VAD frame
SPEED = 2.0
SCRIPT = {0.1: "What is the wifi password?", 0.2: "I need a taxi.", 0.3: "To the airport.", 0.4: "Stop."}
KNOWLEDGE = Path(__file__).parents[1] / "data" / "agent_knowledge"
LONG_REPLY = "Well, here is a long answer, one that keeps going, clause after clause, so that you can cut in."


def speech(seconds: float, amp: float) -> np.ndarray:
    """A square wave whose level names the words FakeAsr hears."""
    n = int(seconds * RATE)
    return (amp * np.where(np.arange(n) % 40 < 20, 1.0, -1.0)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def hear(audio: np.ndarray, _options: object) -> str:
    return SCRIPT.get(round(float(np.abs(audio).max()), 1), "")


@dataclass
class Timeline:
    """A session driven like a microphone, with every event stamped by the input position it arrived at."""

    session: AgentSession
    events: list[tuple[int, AgentEvent]] = field(default_factory=list)
    position: int = 0

    async def play(self, *parts: np.ndarray) -> None:
        audio = np.concatenate(parts)
        for i in range(0, len(audio), BLOCK):
            block = audio[i : i + BLOCK]
            self.session.push(block)
            self.position += len(block)
            await asyncio.sleep(BLOCK / RATE / SPEED)

    async def collect(self) -> None:
        async for event in self.session:
            self.events.append((self.position, event))

    def of(self, kind: type) -> list[tuple[int, AgentEvent]]:
        return [(p, e) for p, e in self.events if isinstance(e, kind)]

    def kinds(self) -> list[str]:
        names: list[str] = []
        for _, e in self.events:
            if not names or names[-1] != type(e).__name__:
                names.append(type(e).__name__)
        return names


@pytest.fixture
def parts() -> Iterator[tuple[AsrService, BlockingExecutor, TtsService]]:
    model = FakeAsr(script=hear)
    asr = AsrService(model, MicroBatcher(model.transcribe_batch, BatcherConfig(max_batch_size=4, max_wait_ms=1)))
    executor = BlockingExecutor(4)
    acoustic, decoder = FakeAcoustic(), FakeDecoder(samples_per_frame=400)  # 0.1 s of audio per character
    catalog = VoiceCatalog(default_voice="fake")
    catalog.register(VoiceEntry(acoustic.voice, lambda: (acoustic, decoder)))
    tts = TtsService(VoicePool(catalog, BatcherConfig(max_batch_size=4, max_wait_ms=1)), TtsStreamParams(max_ahead_s=0))
    yield asr, executor, tts
    tts.close()
    asr.batcher.close()
    executor.shutdown()


def agent_with(parts: tuple[AsrService, BlockingExecutor, TtsService], llm: FakeLlm, **kw: object) -> Agent:
    asr, executor, tts = parts
    return Agent(asr, FakeVad, executor, tts, llm, **kw)  # type: ignore[arg-type]


async def run(agent: Agent, options: AgentOptions, script: object) -> Timeline:
    timeline = Timeline(agent.session(options))
    collector = asyncio.ensure_future(timeline.collect())
    await script(timeline)  # type: ignore[operator]
    await timeline.session.aclose()
    await collector
    return timeline


def test_end_of_turn_after_the_silence_with_the_draft_ready(parts: tuple) -> None:
    llm = FakeLlm("The password is seagull seven.", ttft_s=0.02)

    async def script(t: Timeline) -> None:
        await t.play(silence(0.5), speech(1.5, 0.1), silence(2.5))
        await asyncio.sleep(0.5)

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(turn=TurnParams(silence_ms=500)), script))
    assert t.kinds()[:5] == ["UserSpeechStarted", "UserTurnEnded", "ResponseStarted", "ResponseAudio", "ResponseDone"]
    [(_, ended)] = t.of(UserTurnEnded)
    assert isinstance(ended, UserTurnEnded) and ended.transcript == "What is the wifi password?"
    speech_end = 32_256  # 0.5 s + 1.5 s, rounded up to the end of the last loud VAD frame
    assert ended.end == speech_end
    first_audio = t.of(ResponseAudio)[0][0]
    assert speech_end + 500 * 16 <= first_audio <= speech_end + 500 * 16 + FRAME + BLOCK  # at the deadline
    [(_, done)] = t.of(ResponseDone)
    assert isinstance(done, ResponseDone) and done.status == "completed"
    assert done.transcript == "The password is seagull seven."
    assert done.latency is not None and done.latency.speculative
    assert 0.45 / SPEED <= done.latency.end_of_turn_s <= 0.7 / SPEED  # wall seconds at SPEED x real time
    assert done.latency.total_s >= done.latency.end_of_turn_s
    assert len(llm.requests) == 1  # the draft was released, not made again


def test_a_pause_mid_turn_discards_the_draft_and_answers_the_whole_turn(parts: tuple) -> None:
    llm = FakeLlm("Okay.", ttft_s=0.02)

    async def script(t: Timeline) -> None:
        await t.play(speech(1.0, 0.2), silence(0.35), speech(1.0, 0.3), silence(1.5))
        await asyncio.sleep(0.3)

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    assert len(t.of(UserSpeechStarted)) == 1 and len(t.of(ResponseStarted)) == 1
    [(_, ended)] = t.of(UserTurnEnded)
    assert isinstance(ended, UserTurnEnded) and ended.transcript == "I need a taxi. To the airport."
    assert [m[-1].content for m in llm.requests] == ["I need a taxi.", "I need a taxi. To the airport."]
    assert llm.cancelled == 1 or llm.requests[0] != llm.requests[-1]  # the draft never became audible


def test_barge_in_cancels_within_one_frame_and_truncates_to_what_was_heard(parts: tuple) -> None:
    llm = FakeLlm(lambda m: LONG_REPLY if len(m) == 2 else "Okay.", ttft_s=0.02, word_s=0.1)  # still talking
    speech_start = int(3.5 * RATE)

    async def script(t: Timeline) -> None:
        await t.play(speech(1.5, 0.1), silence(2.0), speech(1.0, 0.4), silence(1.5))
        await asyncio.sleep(0.5)

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    dones = [e for _, e in t.of(ResponseDone) if isinstance(e, ResponseDone)]
    assert [d.status for d in dones] == ["cancelled", "completed"] and dones[0].reason == "turn_detected"
    cancelled_at = t.of(ResponseDone)[0][0]
    confirmed = -(-(speech_start + 100 * 16) // FRAME) * FRAME  # VAD confirms speech after 100 ms
    assert confirmed <= cancelled_at <= confirmed + FRAME + BLOCK  # cancelled within one audio frame
    audio_after = [p for p, e in t.of(ResponseAudio) if isinstance(e, ResponseAudio)
                   and e.response_id == dones[0].response_id and p > cancelled_at]
    assert audio_after == []
    played_s = (cancelled_at - t.of(ResponseAudio)[0][0]) / RATE  # playback starts with the first audio
    heard = dones[0].transcript
    assert LONG_REPLY.startswith(heard) and 0 < len(heard) < len(LONG_REPLY)
    assert abs(len(heard) - played_s * 10) <= 12  # 0.1 s per character, cut at a word end
    history = llm.requests[-1]
    assert history[-2] == ChatMessage("assistant", heard) and history[-1].content == "Stop."


def test_manual_turns_wait_for_the_transcript_of_the_commit(parts: tuple) -> None:
    llm = FakeLlm("Sure.", ttft_s=0.01)

    async def script(t: Timeline) -> None:
        await t.play(speech(1.0, 0.2))
        t.session.commit()
        t.session.respond()  # at once, as clients do: the reply waits for the transcription
        await t.play(silence(1.0))

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(turn=None), script))
    assert t.kinds()[:4] == ["UserTurnEnded", "ResponseStarted", "ResponseAudio", "ResponseDone"]
    assert llm.requests[0][-1] == ChatMessage("user", "I need a taxi.")
    assert not t.of(UserSpeechStarted)  # no server VAD


def test_text_turns_cancel_and_errors(parts: tuple) -> None:
    llm = FakeLlm(LONG_REPLY, ttft_s=0.01, word_s=0.05)

    async def script(t: Timeline) -> None:
        s = t.session
        s.add_text("user", "Tell me a story.")
        s.respond()
        with pytest.raises(InvalidInput) as busy:
            s.respond()
        assert busy.value.code == "conversation_already_has_active_response"
        await t.play(silence(0.3))
        s.cancel_response()
        with pytest.raises(InvalidInput) as idle:
            s.cancel_response()
        assert idle.value.code == "response_cancel_not_active"
        await t.play(silence(0.2))

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    assert t.kinds()[0] == "ItemAdded"
    [(_, done)] = t.of(ResponseDone)
    assert isinstance(done, ResponseDone) and done.status == "cancelled" and done.reason == "client_cancelled"
    assert llm.cancelled == 1


def test_a_failing_llm_fails_the_response_and_the_session_goes_on(parts: tuple) -> None:
    llm = FakeLlm("Back again.", ttft_s=0.01, fail=True)

    async def script(t: Timeline) -> None:
        t.session.add_text("user", "Hello?")
        t.session.respond()
        await t.play(silence(0.3))
        llm.fail = False
        t.session.respond()
        await t.play(silence(0.5))

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    dones = [e for _, e in t.of(ResponseDone) if isinstance(e, ResponseDone)]
    assert [d.status for d in dones] == ["failed", "completed"]
    assert dones[0].error is not None and dones[0].error.code == "llm_unavailable"
    errors = [e for _, e in t.of(AgentError) if isinstance(e, AgentError)]
    assert errors and errors[0].error.code == "llm_unavailable"


def test_truncate_cuts_the_item_and_the_history(parts: tuple) -> None:
    llm = FakeLlm("One two three four five six.", ttft_s=0.01)
    found: dict[str, str] = {}

    async def script(t: Timeline) -> None:
        s = t.session
        s.add_text("user", "Count.")
        s.respond()
        await t.play(silence(0.5))
        [(_, done)] = t.of(ResponseDone)
        assert isinstance(done, ResponseDone)
        s.truncate(done.item_id, 900)  # 0.9 s: "One two three" is 1.3 s of speech at 0.1 s per character
        with pytest.raises(InvalidInput):
            s.truncate("item_missing", 10)
        with pytest.raises(InvalidInput):
            s.truncate(done.item_id, 60_000)
        s.add_text("user", "Go on.")
        s.respond()
        await t.play(silence(0.5))
        found["history"] = llm.requests[-1][-2].content

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    [(_, cut)] = t.of(ItemTruncated)
    assert isinstance(cut, ItemTruncated) and cut.transcript == "One two" and cut.audio_end_ms == 900
    assert found["history"] == "One two"


def test_knowledge_passages_reach_the_prompt(parts: tuple) -> None:
    embedder = FakeTextEmbedder()
    knowledge = KnowledgeBase.build(KNOWLEDGE, embedder)
    llm = FakeLlm("It is seagull seven.", ttft_s=0.01)

    async def script(t: Timeline) -> None:
        t.session.add_text("user", "What is the wifi password of the Blue Lagoon office?")
        t.session.respond()
        await t.play(silence(0.3))

    options = AgentOptions(retrieval=replace(AgentOptions().retrieval, min_score=0.1))
    t = asyncio.run(run(agent_with(parts, llm, embedder=embedder, knowledge=knowledge), options, script))
    assert isinstance(t.events[0][1], ItemAdded)
    last = llm.requests[0][-1].content
    facts, question = last.split("\n\nQuestion: ")
    assert question == "What is the wifi password of the Blue Lagoon office?"
    assert "seagull seven" in facts.splitlines()[-1]  # the best passage right before the question


def test_barge_in_after_generation_truncates_the_item_still_playing(parts: tuple) -> None:
    llm = FakeLlm(LONG_REPLY, ttft_s=0.02)  # all audio made long before it has played

    async def script(t: Timeline) -> None:
        await t.play(speech(1.5, 0.1), silence(2.0), speech(1.0, 0.4), silence(1.5))
        await asyncio.sleep(0.5)

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    first = [e for _, e in t.of(ResponseDone) if isinstance(e, ResponseDone)][0]
    assert first.status == "completed" and first.transcript == LONG_REPLY
    [(cut_at, cut)] = t.of(ItemTruncated)
    assert isinstance(cut, ItemTruncated) and cut.item_id == first.item_id
    confirmed = -(-(int(3.5 * RATE) + 100 * 16) // FRAME) * FRAME
    assert confirmed <= cut_at <= confirmed + FRAME + BLOCK
    played_ms = (cut_at - t.of(ResponseAudio)[0][0]) * 1000 // RATE  # playback starts with the first audio
    assert abs(cut.audio_end_ms - played_ms) <= 40
    assert LONG_REPLY.startswith(cut.transcript) and 0 < len(cut.transcript) < len(LONG_REPLY)
    assert llm.requests[-1][-2] == ChatMessage("assistant", cut.transcript)


def test_an_update_mid_session_keeps_the_session_timeline(parts: tuple) -> None:
    llm = FakeLlm("Okay.", ttft_s=0.01)

    async def script(t: Timeline) -> None:
        await t.play(silence(1.0))
        t.session.update(replace(AgentOptions(), cut_ms=250))  # new VAD settings: a new stream from here
        await t.play(speech(1.0, 0.2), silence(1.5))
        await asyncio.sleep(0.3)

    t = asyncio.run(run(agent_with(parts, llm), AgentOptions(), script))
    [(_, started)] = t.of(UserSpeechStarted)
    [(at, ended)] = t.of(UserTurnEnded)
    assert isinstance(started, UserSpeechStarted) and isinstance(ended, UserTurnEnded)
    assert started.start == RATE  # at 1.0 s on the session's clock (the new stream has no audio to pad with)
    assert 2 * RATE <= ended.end <= 2 * RATE + FRAME and at >= ended.end + 500 * 16
    assert len(t.of(ResponseDone)) == 1
