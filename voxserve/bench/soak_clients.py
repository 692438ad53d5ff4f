"""The soak test's clients: live streams that play known clips at real-time pace (some read slowly, some vanish
mid-clip) and upload clients, each checking that what comes back belongs to its own clip, in order.

A stream commits after each clip (manual turn taking), so the k-th committed item is the k-th clip it played:
* lost: a committed clip without a completed (or failed) event, on a session that ended normally;
* out of order: completions not in commit order;
* mixed: a transcript closer to another clip than to its own (and far from its own).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxserve.audio import decode_audio, resample
from voxserve.audio.pcm import float32_to_pcm16
from voxserve.eval.wer import score_wer
from voxserve.types import SAMPLE_RATE

CHUNK_S = 0.1
RATE = 24000
MIXED_WER = 0.6
"""A transcript is "mixed" when its WER against its own clip is above this while another clip's text fits it
(WER at most :data:`OTHER_WER`); far from every clip, it is only "unmatched" (recognition quality, not routing)."""
OTHER_WER = 0.5


@dataclass(frozen=True)
class Clip:
    """A known recording and what it says."""

    name: str
    path: Path
    reference: str
    audio: np.ndarray = field(repr=False)

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


def load_clips(items: list[tuple[Path, str]], max_s: float = 15.0) -> list[Clip]:
    """Decode the clips (at most ``max_s`` long each, so that a stream plays several)."""
    clips = []
    for path, text in items:
        audio = decode_audio(path)
        if 0.5 < len(audio) / SAMPLE_RATE <= max_s:
            clips.append(Clip(path.stem, path, text.strip(), audio))
    return clips


def best_clip(text: str, clips: list[Clip]) -> tuple[str, float]:
    """The clip a transcript fits best, and its WER against it."""
    scored = [(score_wer(c.reference, text).wer, c.name) for c in clips]
    wer, name = min(scored)
    return name, wer


@dataclass
class StreamOutcome:
    """What one soak stream saw."""

    kind: str  # normal | slow | vanish
    clips: list[str] = field(default_factory=list)  # committed, in order
    committed_ids: list[str] = field(default_factory=list)
    completed: dict[str, str] = field(default_factory=dict)  # item id -> transcript
    completed_order: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)  # commit sent -> completed received
    server_latency_ms: list[float] = field(default_factory=list)
    close_code: int | None = None
    errors: list[str] = field(default_factory=list)
    audio_s: float = 0.0
    suspects: list[dict[str, Any]] = field(default_factory=list)  # items counted as mixed, for the report

    def check(self, clips: list[Clip]) -> dict[str, int]:
        """Counts of lost, out-of-order, mixed, empty and failed items."""
        by_name = {c.name: c for c in clips}
        shed = self.close_code == 1013  # the server shed this stream (documented), its last items with it
        ended_normally = self.kind != "vanish" and not shed
        lost = mixed = empty = unmatched = dropped = 0
        for item, clip in zip(self.committed_ids, self.clips):
            text = self.completed.get(item)
            if text is None:
                lost += int(ended_normally and item not in self.failed)
                dropped += int(not ended_normally)  # its session was shed (1013) or its client vanished
                continue
            if not text.strip():
                empty += 1
                continue
            best, best_wer = best_clip(text, clips)
            own = score_wer(by_name[clip].reference, text).wer
            if own > MIXED_WER:
                is_mixed = best != clip and best_wer <= OTHER_WER
                mixed += int(is_mixed)
                unmatched += int(not is_mixed)
                self.suspects.append({"clip": clip, "text": text, "own_wer": round(own, 2), "closest": best,
                                      "closest_wer": round(best_wer, 2), "mixed": is_mixed})
        lost += max(0, len(self.clips) - len(self.committed_ids)) if ended_normally else 0
        order = [i for i in self.completed_order if i in self.committed_ids]
        out_of_order = int(order != sorted(order, key=self.committed_ids.index))
        return {"lost": lost, "out_of_order": out_of_order, "mixed": mixed, "empty": empty, "unmatched": unmatched,
                "failed": len(self.failed), "items": len(self.committed_ids), "shed": int(shed),
                "dropped_with_session": dropped}


def _payloads(clip: Clip) -> list[str]:
    pcm = float32_to_pcm16(resample(np.concatenate([clip.audio, np.zeros(SAMPLE_RATE // 4, np.float32)]),
                                    SAMPLE_RATE, RATE))
    step = int(RATE * 2 * CHUNK_S)
    return [json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm[i : i + step]).decode()})
            for i in range(0, len(pcm), step)]


async def run_stream(url: str, playlist: list[Clip], seconds: float, kind: str, seed: int,
                     drain_s: float = 120.0) -> StreamOutcome:
    """Play clips at real-time pace for about ``seconds`` (whole clips), committing after each; a ``slow``
    client reads with pauses, a ``vanish`` client drops its connection mid-way through its second clip."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    out = StreamOutcome(kind)
    commit_at: list[float] = []
    async with connect(url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription", max_size=2**24,
                       open_timeout=60, close_timeout=5) as ws:
        await ws.send(json.dumps({"type": "transcription_session.update", "session": {
            "turn_detection": None, "input_audio_transcription": {"language": "en"}}}))
        reader = asyncio.ensure_future(_read(ws, out, commit_at, kind))
        try:
            await _play(ws, out, playlist, seconds, kind, seed, commit_at)
            if kind == "vanish":
                return out
            deadline = time.monotonic() + drain_s
            while len(out.completed) + len(out.failed) < len(out.committed_ids) or len(out.committed_ids) < len(out.clips):
                if reader.done() or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
        except ConnectionClosed as exc:
            out.close_code = exc.rcvd.code if exc.rcvd else None
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
    return out


async def _play(ws: Any, out: StreamOutcome, playlist: list[Clip], seconds: float, kind: str, seed: int,
                commit_at: list[float]) -> None:
    t0 = time.monotonic()
    sent = 0
    for n, clip in enumerate(playlist):
        if n and out.audio_s >= seconds:
            break
        payloads = _payloads(clip)
        vanish_at = len(payloads) * (0.3 + 0.4 * ((seed * 7919) % 100) / 100) if kind == "vanish" and n == 1 else None
        for i, payload in enumerate(payloads):
            if vanish_at is not None and i >= vanish_at:
                ws.transport.abort()  # gone: no close frame, no goodbye
                return
            await ws.send(payload)
            sent += 1
            delay = t0 + sent * CHUNK_S - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        out.audio_s += len(payloads) * CHUNK_S
        out.clips.append(clip.name)
        commit_at.append(time.monotonic())
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))


async def _read(ws: Any, out: StreamOutcome, commit_at: list[float], kind: str) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        async for message in ws:
            event = json.loads(message)
            t = event["type"]
            if t == "input_audio_buffer.committed":
                out.committed_ids.append(event["item_id"])
            elif t.endswith("input_audio_transcription.completed"):
                item = event["item_id"]
                out.completed[item] = event["transcript"]
                out.completed_order.append(item)
                if item in out.committed_ids:
                    k = out.committed_ids.index(item)
                    if k < len(commit_at):
                        out.latency_s.append(time.monotonic() - commit_at[k])
                out.server_latency_ms.append(float(event.get("voxserve", {}).get("latency_ms", 0.0)))
            elif t.endswith("input_audio_transcription.failed"):
                out.failed.append(event["item_id"])
            elif t == "error":
                out.errors.append(event["error"]["code"])
            if kind == "slow":
                await asyncio.sleep(0.25)  # a reader on a bad network: far slower than events arrive in bursts
    except ConnectionClosed as exc:
        out.close_code = exc.rcvd.code if exc.rcvd else None


@dataclass
class UploadOutcome:
    """What one upload client saw."""

    ok: int = 0
    mixed: int = 0
    errors: list[str] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)


async def run_uploads(url: str, clips: list[Clip], seconds: float, offset: int) -> UploadOutcome:
    """Upload clips one after another for ``seconds``; each answer must be its own clip's text."""
    import httpx

    out = UploadOutcome()
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        i = offset
        while time.monotonic() < deadline:
            clip = clips[i % len(clips)]
            i += 1
            started = time.monotonic()
            r = await client.post("/v1/audio/transcriptions", data={"language": "en"},
                                  files={"file": (clip.path.name, clip.path.read_bytes())})
            if r.status_code != 200:
                out.errors.append(f"{r.status_code}:{r.json().get('error', {}).get('code')}")
                continue
            out.latency_s.append(time.monotonic() - started)
            best, best_wer = best_clip(r.json()["text"], clips)
            own = score_wer(clip.reference, r.json()["text"]).wer
            if best != clip.name and own > MIXED_WER and best_wer <= OTHER_WER:
                out.mixed += 1
            else:
                out.ok += 1
    return out
