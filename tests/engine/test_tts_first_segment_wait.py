"""Text deltas arriving slower than a clause: ``SpeakOptions.first_segment_wait_s`` cuts the first words at a word
end (not on "by", "the" ...), the path the speech WebSocket and the agent's replies share; fake models."""

from __future__ import annotations

import asyncio

from tests.engine.test_tts_service import service
from voxserve.agent.reply import ReplyParts
from voxserve.streaming.tts import SpeakOptions
from voxserve.types import SynthesisChunk

REPLY = "The table by the window is ready for you now. Please follow me."


def speak_slowly(wait_s: float | None, gap_s: float = 0.03) -> list[SynthesisChunk]:
    """``REPLY`` pushed a word at a time, ``gap_s`` apart (an LLM at ~30 words/s)."""
    tts = service()

    async def run() -> list[SynthesisChunk]:
        stream = tts.stream(None, SpeakOptions(first_segment_wait_s=wait_s))

        async def feed() -> None:
            for i, word in enumerate(REPLY.split()):
                stream.push_text(word if i == 0 else " " + word)
                await asyncio.sleep(gap_s)
            stream.end_input()

        feeder = asyncio.ensure_future(feed())
        chunks = [chunk async for chunk in stream]
        await feeder
        return chunks

    try:
        return asyncio.run(run())
    finally:
        tts.close()


def test_late_first_clause_is_cut_at_a_word_that_can_end_a_phrase() -> None:
    chunks = speak_slowly(0.02)
    segments = list(dict.fromkeys(c.text for c in chunks))
    # "The table by" and "The table by the" end on words that need more: the cut waits for "window"
    assert segments[0] == "The table by the window"
    assert " ".join(segments) == REPLY  # every word spoken once, in order


def test_without_a_wait_the_first_segment_is_the_first_sentence() -> None:
    segments = list(dict.fromkeys(c.text for c in speak_slowly(None)))
    assert segments == ["The table by the window is ready for you now.", "Please follow me."]


def test_a_wait_longer_than_the_writer_changes_nothing() -> None:
    segments = list(dict.fromkeys(c.text for c in speak_slowly(5.0)))
    assert segments[0] == "The table by the window is ready for you now."


def test_agent_replies_pass_their_wait_to_the_stream() -> None:
    parts = ReplyParts(llm=None, tts=None)  # type: ignore[arg-type]
    assert parts.stream_options.first_segment_wait_s == 0.15
    assert ReplyParts(None, None, first_segment_wait_s=-1).stream_options.first_segment_wait_s is None  # type: ignore[arg-type]
