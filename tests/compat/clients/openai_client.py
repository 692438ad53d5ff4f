"""Compatibility client: the official ``openai`` Python SDK against voxserve.

Run with the openai env's interpreter:
    python openai_client.py --base-url http://127.0.0.1:PORT/v1 --clip CLIP --out DIR

The client is built with its defaults (only ``base_url`` and ``api_key="unused"``). Every call runs under a
watchdog (``common.TIMEOUT_S``) and is recorded in ``DIR/result.json``; a failure is recorded, never raised.
Models and voices are OpenAI's current default names (see each call's ``note``).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path

import av
import numpy as np
import openai
from common import TEXT, decode_pcm16, finish, parse_args, run_call, write_wav
from openai import OpenAI

QUESTION = "What is the capital of France? Answer in one sentence."
RATE = 24000  # OpenAI's pcm / realtime audio/pcm contract


def probe_rate(path: Path) -> int | None:
    """Sample rate of an encoded file: Ogg Opus's OpusHead input rate (decoders always give 48 kHz),
    else the rate PyAV reads (None when it cannot be read)."""
    head = path.read_bytes()[:512]
    i = head.find(b"OpusHead")
    if i >= 0 and len(head) >= i + 16:
        return int.from_bytes(head[i + 12:i + 16], "little") or None
    try:
        with av.open(str(path)) as c:
            return c.streams.audio[0].rate
    except Exception:
        return None


def main() -> int:
    args = parse_args()
    out = args.out
    client = OpenAI(base_url=args.base_url, api_key="unused")
    clip = Path(args.clip)
    calls: list = []

    def transcribe_json():
        with clip.open("rb") as f:
            r = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f)
        return {"text": r.text, "note": "model gpt-4o-transcribe, default response_format (json)"}

    def transcribe_verbose():
        with clip.open("rb") as f:
            r = client.audio.transcriptions.create(
                model="whisper-1", file=f, response_format="verbose_json",
                timestamp_granularities=["word", "segment"])
        words, segs = r.words or [], r.segments or []
        return {"text": r.text, "note": f"model whisper-1, verbose_json; {len(words)} words, {len(segs)} segments, "
                                         f"language={r.language!r}, duration={r.duration}"}

    def transcribe_stream():
        with clip.open("rb") as f:
            stream = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, stream=True)
            deltas, text, usage, types = 0, None, None, set()
            for ev in stream:
                types.add(ev.type)
                if ev.type == "transcript.text.delta":
                    deltas += 1
                elif ev.type == "transcript.text.done":
                    text, usage = ev.text, ev.usage
        fields = {"text": text, "note": f"model gpt-4o-transcribe, stream=True; {deltas} deltas; "
                                        f"done.usage present={usage is not None}; event types {sorted(types)}"}
        if text is None:
            fields["error"] = "no transcript.text.done event"
        return fields

    def transcribe_logprobs():
        with clip.open("rb") as f:
            r = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=f, include=["logprobs"],
                                                   response_format="json")
        lp = r.logprobs or []
        fields = {"text": r.text, "note": f"model gpt-4o-transcribe, include=['logprobs']; {len(lp)} logprobs"}
        if not lp:
            fields["error"] = "response has no logprobs"
        return fields

    run_call(calls, "transcribe_json", "transcription", transcribe_json)
    run_call(calls, "transcribe_verbose", "transcription", transcribe_verbose)
    run_call(calls, "transcribe_stream", "transcription", transcribe_stream)
    run_call(calls, "transcribe_logprobs", "transcription", transcribe_logprobs)

    for fmt in ("mp3", "opus", "aac", "flac", "wav", "pcm"):
        def speech(fmt=fmt):
            r = client.audio.speech.create(model="gpt-4o-mini-tts", voice="marin", input=TEXT, response_format=fmt)
            data = r.content
            note = f"model gpt-4o-mini-tts, voice marin, response_format {fmt}; {len(data)} bytes"
            if fmt == "pcm":
                path = out / "speech_pcm.wav"
                write_wav(path, data, RATE)
                return {"audio": path.name, "sample_rate": RATE, "input": TEXT,
                        "note": note + "; raw s16le wrapped as WAV at the 24 kHz pcm contract rate"}
            path = out / f"speech_{fmt}.{fmt}"
            path.write_bytes(data)
            return {"audio": path.name, "sample_rate": probe_rate(path), "input": TEXT,
                    "note": note + f"; content-type {r.response.headers.get('content-type')}"}
        run_call(calls, f"speech_{fmt}", "speech", speech)

    def speech_stream_sse():
        pcm, types, usage = bytearray(), [], None
        with client.audio.speech.with_streaming_response.create(
                model="gpt-4o-mini-tts", voice="marin", input=TEXT, response_format="pcm",
                stream_format="sse") as r:
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if not payload or payload == "[DONE]":
                    continue
                ev = json.loads(payload)
                types.append(ev.get("type"))
                if ev.get("type") == "speech.audio.delta":
                    pcm += base64.b64decode(ev["audio"])
                elif ev.get("type") == "speech.audio.done":
                    usage = ev.get("usage")
        path = out / "speech_stream_sse.wav"
        write_wav(path, bytes(pcm), RATE)
        fields = {"audio": path.name, "sample_rate": RATE, "input": TEXT,
                  "note": f"model gpt-4o-mini-tts, voice marin, pcm, stream_format=sse; "
                          f"{types.count('speech.audio.delta')} deltas, {len(pcm)} bytes; "
                          f"speech.audio.done seen={'speech.audio.done' in types}, usage={usage}"}
        if not pcm:
            fields["error"] = f"no speech.audio.delta audio (events {types})"
        return fields

    run_call(calls, "speech_stream_sse", "speech", speech_stream_sse)

    pcm_clip = decode_pcm16(str(clip), RATE)

    def realtime_transcription():
        step = RATE * 2 // 10  # 100 ms of s16 mono
        transcripts, pending, errors, types = {}, set(), [], []
        speaking = False
        with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
            conn.session.update(session={
                "type": "transcription",
                "audio": {"input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "transcription": {"model": "gpt-4o-transcribe"},
                    "turn_detection": {"type": "server_vad"},
                }},
            })
            for ev in conn:  # wait for the update to be acknowledged
                types.append(ev.type)
                if ev.type == "error":
                    errors.append(ev.error.model_dump(exclude_none=True))
                if ev.type == "session.updated" or len(errors) > 0:
                    break
            audio = pcm_clip + bytes(int(RATE * 1.5) * 2)
            for i in range(0, len(audio), step):
                conn.input_audio_buffer.append(audio=base64.b64encode(audio[i:i + step]).decode())
            for ev in conn:
                types.append(ev.type)
                if ev.type == "error":
                    errors.append(ev.error.model_dump(exclude_none=True))
                    break
                if ev.type == "input_audio_buffer.speech_started":
                    speaking = True
                elif ev.type == "input_audio_buffer.speech_stopped":
                    speaking = False
                elif ev.type == "input_audio_buffer.committed":
                    pending.add(ev.item_id)
                elif ev.type == "conversation.item.input_audio_transcription.completed":
                    pending.discard(ev.item_id)
                    transcripts[ev.item_id] = ev.transcript
                elif ev.type == "conversation.item.input_audio_transcription.failed":
                    pending.discard(ev.item_id)
                    errors.append(ev.error.model_dump(exclude_none=True))
                if transcripts and not pending and not speaking:
                    break
        fields = {"text": " ".join(t.strip() for t in transcripts.values()),
                  "note": f"connect(extra_query={{'intent': 'transcription'}}); session.update type=transcription, "
                          f"audio/pcm 24 kHz, transcription.model gpt-4o-transcribe, server_vad; "
                          f"{len(audio) // step + 1} appends of 100 ms; {len(transcripts)} transcripts; "
                          f"events {sorted(set(types))}"}
        if errors:
            fields["error"] = f"server error events: {errors}"
        elif not transcripts:
            fields["error"] = "no conversation.item.input_audio_transcription.completed"
        return fields

    def realtime_turn():
        pcm, transcript, text, errors, types = bytearray(), "", "", [], []
        rate = RATE
        with client.realtime.connect(model="gpt-realtime") as conn:
            conn.session.update(session={
                "type": "realtime",
                "output_modalities": ["audio"],
                "audio": {"output": {"format": {"type": "audio/pcm", "rate": RATE}}},
            })
            for ev in conn:
                types.append(ev.type)
                if ev.type == "error":
                    errors.append(ev.error.model_dump(exclude_none=True))
                    break
                if ev.type == "session.updated":
                    fmt = ev.session.audio.output.format if ev.session.audio and ev.session.audio.output else None
                    rate = getattr(fmt, "rate", None) or RATE
                    break
            conn.conversation.item.create(item={
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]})
            conn.response.create()
            for ev in conn:
                types.append(ev.type)
                if ev.type == "error":
                    errors.append(ev.error.model_dump(exclude_none=True))
                    break
                if ev.type == "response.output_audio.delta":
                    pcm += base64.b64decode(ev.delta)
                elif ev.type == "response.output_audio_transcript.delta":
                    transcript += ev.delta
                elif ev.type == "response.output_audio_transcript.done":
                    transcript = ev.transcript
                elif ev.type == "response.output_text.done":
                    text = ev.text
                elif ev.type == "response.done":
                    if ev.response.status != "completed":
                        errors.append({"response.status": ev.response.status,
                                       "details": str(ev.response.status_details)})
                    break
        path = out / "turn.wav"
        write_wav(path, bytes(pcm), rate)
        fields = {"transcript": transcript or text, "audio": path.name, "sample_rate": rate,
                  "note": f"model gpt-realtime, output audio/pcm {rate} Hz (session.updated), default voice; "
                          f"{types.count('response.output_audio.delta')} audio deltas, {len(pcm)} bytes; "
                          f"events {sorted(set(types))}"}
        if errors:
            fields["error"] = f"server error events: {errors}"
        elif not pcm or not (transcript or text):
            fields["error"] = f"missing audio ({len(pcm)} bytes) or transcript ({transcript!r})"
        return fields

    run_call(calls, "realtime_transcription", "transcription", realtime_transcription)
    run_call(calls, "realtime_turn", "turn", realtime_turn)
    if importlib.util.find_spec("websockets") is None:  # the SDK's realtime needs the openai[realtime] extra
        for rec in calls[-2:]:
            rec["note"] = "client-side: this environment has no `websockets` (install openai[realtime])"

    return finish(out, "openai", {"openai": openai.__version__, "numpy": np.__version__, "av": av.__version__}, calls)


if __name__ == "__main__":
    sys.exit(main())
