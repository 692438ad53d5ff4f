"""Many different real utterances back to back in ONE live session, as a user's microphone sends them.

The regressions of the live path on unseen speech: the previous utterance's text leaked into later ones
("8. The press yard" -> "8. The narrative ..."), an utterance came back twice, and casual speech lost its
words. Here clips of the check half (casual speech with fillers and pauses, an utterance longer than 8 s,
counting that starts with a digit, one-word answers, whispering) are sent one after another with 2 s of
silence, through the real server and the Realtime protocol, and the session's text is held to the same
clips transcribed as files.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.server.conftest import LiveServer
from tests.server.realtime_client import open_session
from tests.server.test_realtime import GA_UPDATE, check_order
from voxserve.audio import decode_audio, resample
from voxserve.audio.pcm import float32_to_pcm16
from voxserve.eval.wer import pooled, score_wer

pytestmark = pytest.mark.slow
CLIPS = ("ub_english_123.wav", "mfa_acoustic_corpus.wav", "fw_jfk.flac", "mfa_theother.flac", "sb_example1.wav",
         "mfa_crossword.flac", "mfa_reallylong.flac", "mfa_falsetto2.flac", "mfa_longstop.flac")
# Not mfa_whisper2: whispering stays under the session's server_vad threshold of 0.5 (OpenAI's default, which
# the client sets), so it never becomes an utterance; the offline VAD (0.3) hears it.


def _words(text: str) -> list[str]:
    return [w.strip(".,!?;:").lower() for w in text.split() if w.strip(".,!?;:")]


def test_back_to_back_utterances_in_one_session(live: LiveServer, corpus: Path) -> None:
    paths = [corpus / "asr" / name for name in CLIPS]
    gap = np.zeros(2 * 16000, np.float32)
    audio = np.concatenate([part for p in paths for part in (decode_audio(p), gap)])
    offline = []
    for p in paths:
        with open(p, "rb") as f:
            r = httpx.post(live.url + "/v1/audio/transcriptions", files={"file": (p.name, f)},
                           data={"model": "whisper-1", "language": "en"}, timeout=120)
        offline.append(r.json()["text"])

    s = open_session(live.url)
    update = json.loads(json.dumps(GA_UPDATE))
    update["session"]["audio"]["input"]["transcription"]["model"] = "gpt-4o-transcribe"  # clients' default name
    s.send(update)
    s.stream(float32_to_pcm16(resample(audio, 16000, 24000)), chunk_ms=100, speed=3.0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stopped = len(s.of_type("input_audio_buffer.committed"))
        if stopped and len(s.transcripts()) >= stopped:
            break
        time.sleep(0.05)
    s.ws.close()
    check_order(s.events)  # every item started, stopped, committed, completed, in order
    done = s.of_type("conversation.item.input_audio_transcription.completed")
    items = [e["item_id"] for e in done]
    assert len(items) == len(set(items)) == len(s.of_type("input_audio_buffer.committed"))  # each once
    texts = [e["transcript"] for e in done]

    references = [p.with_suffix(".txt").read_text() for p in paths]
    live_score = score_wer(" ".join(references), " ".join(texts))
    offline_score = pooled([score_wer(r, t) for r, t in zip(references, offline)])
    # Measured here (whisper-base int8, 9 clips, 128 words, twice): live 14.8 %, offline 11.7 %. The gap is
    # the VAD cutting casual speech at its 500 ms pauses ("but um" alone becomes "Varam", "one" and "two
    # three" two items); before the fix previous text also leaked into later utterances (46.6 % elsewhere).
    assert live_score.wer <= offline_score.wer * 1.25 + 0.03, (live_score, offline_score, texts)

    for before, after in zip(texts, texts[1:]):  # nothing of one utterance copied into the next
        a, b = _words(before), _words(after)
        assert not (len(a) >= 2 and b[:2] == a[:2]), (before, after)
        assert after.strip() != before.strip() or not after.strip(), (before, after)
