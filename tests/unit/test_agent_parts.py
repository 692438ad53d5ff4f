"""The agent's pure parts: playout truncation, prompt and history budget, passage chunking and search, and
the LLM clients (an HTTP endpoint through a mock transport; the embedded client with a fake blocking model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from voxserve.agent.context import (
    ChunkParams,
    KnowledgeBase,
    RetrievalParams,
    Retriever,
    best_scores,
    is_follow_up,
    read_folder,
    split_passages,
)
from voxserve.agent.fakes import FakeChatModel, FakeTextEmbedder
from voxserve.agent.llm import EmbeddedLlm, HttpChatLlm, LlmOptions, LlmUnavailable, chat_completions_url
from voxserve.agent.playout import PlayoutLog
from voxserve.agent.prompt import ChatMessage, History, PromptParams, build_messages, facts_block
from voxserve.errors import InvalidInput

KNOWLEDGE = Path(__file__).parents[1] / "data" / "agent_knowledge"


# ------------------------------------------------------------------------------------------- playout


def test_heard_text_whole_segments_then_whole_words() -> None:
    text = "The password is seagull seven. Anything else?"
    log = PlayoutLog(text)
    log.add(1.0, 0, 15)  # "The password is" in two chunks
    log.add(0.5, 0, 15)
    log.add(1.0, 16, 30)  # "seagull seven."
    log.add(1.0, 31, 45)
    assert log.audio_s == pytest.approx(3.5)
    assert log.heard_text(0.0) == ""
    assert log.heard_text(0.99) == "The"  # 0.66 of "The password is": "The" and most of "password"
    assert log.heard_text(1.5) == "The password is"
    assert log.heard_text(1.9) == "The password is"  # 40 % of "seagull seven.": "seagull" is not over
    assert log.heard_text(2.1) == "The password is seagull"
    assert log.heard_text(2.5) == "The password is seagull seven."
    assert log.heard_text(99) == text


# ------------------------------------------------------------------------------------------- prompt


def test_history_window_keeps_the_latest_whole_exchanges() -> None:
    h = History()
    for i in range(5):
        h.add_user(f"question {i} " + "word " * 10)
        h.add_assistant(f"answer {i} " + "word " * 10)
    count = lambda s: len(s.split())  # noqa: E731
    kept = h.window(2 * (2 * 12 + 10), count)
    assert [e.number for e in kept] == [3, 4]
    assert h.window(0, count) == []


def test_user_turns_without_a_reply_join() -> None:
    h = History()
    h.add_user("Hello.")
    assert h.question("Are you there?") == "Hello. Are you there?"
    h.add_user("Are you there?")
    assert len(h.exchanges) == 1 and h.exchanges[0].user == "Hello. Are you there?"
    h.add_assistant("Yes.")
    assert h.question("Good.") == "Good."


def test_facts_go_right_before_the_question_best_last() -> None:
    h = History()
    h.add_user("Hi.")
    h.add_assistant("Hello!")
    messages = build_messages(PromptParams(instructions="Be brief."), h.exchanges, "Wifi password?",
                              ["best fact", "second fact"])
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0].content.startswith("Be brief. Reply with one or two short spoken sentences")
    assert messages[-1].content == "Facts: second fact\nbest fact\n\nQuestion: Wifi password?"
    assert build_messages(PromptParams(grounding_rule=""), [], "Hi")[-1] == ChatMessage("user", "Hi")
    assert facts_block(["a" * 10, "b" * 10], 15) == "a" * 10  # the least relevant that does not fit goes


# ------------------------------------------------------------------------------------------- chunking


def test_markdown_sections_become_titled_passages() -> None:
    text = "# Offices\n\nIntro line.\n\n## Blue office\n\nIt is at 1 Road. It opens at 8.\n- Wifi: **gull**\n"
    passages = split_passages(text, "o.md", ChunkParams(max_chars=60))
    assert [(p.title, p.text) for p in passages] == [
        ("Offices", "Intro line."),
        ("Offices / Blue office", "It is at 1 Road. It opens at 8. Wifi: gull"),
    ]
    assert passages[1].sentences == ("It is at 1 Road.", "It opens at 8.", "Wifi: gull")
    assert passages[1].prompt_text() == "Blue office: It is at 1 Road. It opens at 8. Wifi: gull"  # innermost title
    assert passages[1].prompt_text([2]) == "Blue office: Wifi: gull"
    small = split_passages("One two three. Four five six. Seven eight nine.", "notes.txt", ChunkParams(max_chars=30))
    assert [p.text for p in small] == ["One two three. Four five six.", "Seven eight nine."]
    assert small[0].title == "notes"
    long_word = split_passages("x" * 50, "a.txt", ChunkParams(max_chars=20))
    assert all(len(p.text) <= 20 for p in long_word) and "".join(p.text for p in long_word) == "x" * 50


def test_read_folder(tmp_path: Path) -> None:
    passages = read_folder(KNOWLEDGE)
    assert any("seagull seven" in p.text for p in passages)
    assert {p.source for p in passages} == {"offices.md", "policies.txt", "team.md"}
    with pytest.raises(InvalidInput):
        read_folder(tmp_path / "missing")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(InvalidInput):
        read_folder(tmp_path)  # no text files


@pytest.mark.parametrize("question, expected", [
    ("And where is that office?", True), ("What is its wifi password?", True), ("What about cats?", True),
    ("Who is the head of customer service?", False), ("When does the Red Rock office open?", False), ("", False),
])
def test_follow_up_questions(question: str, expected: bool) -> None:
    assert is_follow_up(question) is expected


def test_best_scores_order_threshold_and_ties() -> None:
    scores = np.array([0.2, 0.9, 0.5, 0.9], np.float32)
    assert best_scores(scores, 3, 0.3) == [(1, pytest.approx(0.9)), (3, pytest.approx(0.9)), (2, pytest.approx(0.5))]
    assert best_scores(scores, 0, 0.0) == [] and best_scores(scores, 5, 0.95) == []


def test_retriever_with_fake_embeddings_finds_follow_ups_and_recalls_old_turns() -> None:
    embedder = FakeTextEmbedder()
    kb = KnowledgeBase.build(KNOWLEDGE, embedder)
    r = Retriever(embedder, kb, RetrievalParams(top_k=2, min_score=0.2, margin=0.5, memory_min_score=0.2))
    hits = r.search("wifi password Blue Lagoon office")
    assert "seagull seven" in hits[0].passage.text
    assert hits[0].prompt_text.startswith("Blue Lagoon office: The wifi password")  # compressed to its sentence
    assert "Harbour Road" not in hits[0].prompt_text
    follow_up = r.search("and where is that", previous="wifi password Blue Lagoon office")
    assert follow_up[0].passage.short_title == "Blue Lagoon office"  # the passage of the question before
    refund = r.search("refund cancelled trip price")
    assert refund[0].prompt_text.endswith("After that, half of the price is refunded.")  # a sentence that goes on
    assert r.search("   ") == []
    r.remember(0, "My favourite colour is turquoise.", "Noted.")
    assert all(h.passage.source != "conversation" for h in r.search("favourite colour turquoise", recall_before=0))
    recalled = r.search("favourite colour turquoise", recall_before=1)
    assert recalled[-1].passage.source == "conversation" and "turquoise" in recalled[-1].passage.text  # after facts


# ------------------------------------------------------------------------------------------- LLM clients


def _sse(*pieces: str) -> bytes:
    lines = [f"data: {json.dumps({'choices': [{'delta': {'content': p}}]})}\n\n" for p in pieces]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def test_http_llm_streams_deltas_and_maps_failures() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404, text="no such route")
        return httpx.Response(200, content=_sse("Hel", "lo", "."), headers={"content-type": "text/event-stream"})

    async def run() -> None:
        llm = HttpChatLlm("http://llm.test", model="m", transport=httpx.MockTransport(handler))
        pieces = [p async for p in llm.stream([ChatMessage("user", "hi")], LlmOptions(max_tokens=5))]
        assert pieces == ["Hel", "lo", "."]
        assert seen[0]["stream"] is True and seen[0]["model"] == "m" and seen[0]["max_tokens"] == 5
        bad = HttpChatLlm("http://llm.test/v2", transport=httpx.MockTransport(handler))
        with pytest.raises(LlmUnavailable, match="404"):
            [p async for p in bad.stream([ChatMessage("user", "hi")], LlmOptions())]
        down = HttpChatLlm("http://127.0.0.1:9")  # nothing listens on the discard port
        with pytest.raises(LlmUnavailable, match="unreachable"):
            [p async for p in down.stream([ChatMessage("user", "hi")], LlmOptions())]
        for client in (llm, bad, down):
            await client.aclose()

    asyncio.run(run())
    assert chat_completions_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_completions_url("http://h:1/x/chat/completions") == "http://h:1/x/chat/completions"
    with pytest.raises(InvalidInput):
        HttpChatLlm("llm.test")


def test_embedded_llm_streams_from_a_thread_and_stops_when_cancelled() -> None:
    model = FakeChatModel(pieces=[f" w{i}" for i in range(100)], piece_s=0.005)

    async def run() -> list[str]:
        llm = EmbeddedLlm(model)
        got: list[str] = []
        async for piece in llm.stream([ChatMessage("user", "count")], LlmOptions(max_tokens=100)):
            got.append(piece)
            if len(got) == 3:
                break  # the consumer goes away: aclose() of the generator stops the thread
        await asyncio.sleep(0.1)
        await llm.aclose()
        return got

    got = asyncio.run(run())
    assert got == [" w0", " w1", " w2"]
    assert model.stopped.is_set() and model.produced <= 5  # stopped within a piece or two
