"""A small Realtime-protocol test client over ``websockets`` (sync API), pacing audio like a microphone."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.sync.client import ClientConnection, connect

from voxserve.audio import decode_audio, resample
from voxserve.audio.pcm import float32_to_pcm16


def pcm24(path: Any, silence_s: float = 1.5) -> bytes:
    """A file as 24 kHz PCM16 with trailing silence (so server VAD ends the last utterance)."""
    audio = np.concatenate([decode_audio(path), np.zeros(int(silence_s * 16000), np.float32)])
    return float32_to_pcm16(resample(audio, 16000, 24000))


@dataclass
class Session:
    """Events received by a client (a reader thread collects them)."""

    ws: ClientConnection
    events: list[dict[str, Any]] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)
    last_event_at: float = field(default_factory=time.monotonic)

    def start(self) -> Session:
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        try:
            for message in self.ws:
                self.events.append(json.loads(message))
                self.last_event_at = time.monotonic()
        except Exception:  # noqa: BLE001 - the socket closed
            pass
        finally:
            self.closed.set()

    def send(self, event: dict[str, Any]) -> None:
        self.ws.send(json.dumps(event))

    def stream(self, pcm: bytes, chunk_ms: int = 200, speed: float = 4.0, rate: int = 24000) -> None:
        """Append audio in chunks, paced at ``speed`` x real time."""
        step = rate * 2 * chunk_ms // 1000
        for i in range(0, len(pcm), step):
            self.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[i : i + step]).decode()})
            time.sleep(chunk_ms / 1000 / speed)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.of_type(kind)
            if len(found) >= count:
                return found
            if self.closed.is_set():
                break
            time.sleep(0.02)
        raise AssertionError(f"expected {count} {kind}; got {[e['type'] for e in self.events]}")

    def drain(self, idle: float = 1.0, timeout: float = 60) -> None:
        """Wait until every utterance the server started has its final (completed or failed) and nothing more
        arrived for ``idle`` seconds: a test that slept a fixed time after its last expected event lost the
        final utterance on a slow CI machine."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.closed.is_set():
            started = len(self.of_type("input_audio_buffer.speech_started"))
            finals = len(self.of_type("conversation.item.input_audio_transcription.completed")) + len(
                self.of_type("conversation.item.input_audio_transcription.failed"))
            quiet = time.monotonic() - self.last_event_at >= idle
            if started and finals >= started and quiet:
                return
            time.sleep(0.05)
        raise AssertionError(f"utterances left without a final; got {[e['type'] for e in self.events]}")

    def transcripts(self) -> list[str]:
        return [e["transcript"] for e in self.of_type("conversation.item.input_audio_transcription.completed")]


def open_session(url: str, **headers: str) -> Session:
    ws = connect(url.replace("http://", "ws://") + "/v1/realtime?intent=transcription",
                 additional_headers=headers or None, max_size=2**24, open_timeout=30)
    return Session(ws).start()
