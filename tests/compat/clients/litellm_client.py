"""Compatibility client: LiteLLM's ``transcription`` and ``speech`` (OpenAI provider) against voxserve.

Run with the litellm env's interpreter:
    python litellm_client.py --base-url http://127.0.0.1:PORT/v1 --clip CLIP --out DIR

Only ``api_base`` and ``api_key="unused"`` are set per call; the bundled cost map is used and telemetry is
off, so nothing leaves loopback. Each call runs under a watchdog; results go to ``DIR/result.json``.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before importing litellm: no cost-map download

import sys
from importlib.metadata import version

import av
import litellm
from common import TEXT, finish, parse_args, run_call

litellm.telemetry = False

EXTENSIONS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/ogg": "opus", "audio/opus": "opus", "audio/aac": "aac",
              "audio/flac": "flac", "audio/wav": "wav", "audio/x-wav": "wav", "audio/pcm": "pcm"}


def main() -> int:
    args = parse_args()
    out = args.out
    calls: list = []

    def transcription(model: str):
        def call():
            with open(args.clip, "rb") as f:
                r = litellm.transcription(model=model, file=f, api_base=args.base_url, api_key="unused")
            fields = {"text": r.text, "note": f"litellm.transcription(model={model!r}), default response_format"}
            if not r.text:
                fields["error"] = "empty transcript"
            return fields
        return call

    def speech():
        r = litellm.speech(model="openai/tts-1", voice="alloy", input=TEXT, api_base=args.base_url, api_key="unused")
        data = r.content
        ctype = (r.response.headers.get("content-type") or "").split(";")[0].strip()
        ext = EXTENSIONS.get(ctype, "bin")
        path = out / f"speech.{ext}"
        path.write_bytes(data)
        try:
            with av.open(str(path)) as c:
                rate, codec = c.streams.audio[0].rate, c.streams.audio[0].codec_context.name
        except Exception as e:  # noqa: BLE001
            return {"audio": path.name, "sample_rate": None, "input": TEXT,
                    "error": f"returned audio ({ctype}, {len(data)} bytes) does not decode: {type(e).__name__}: {e}"}
        return {"audio": path.name, "sample_rate": rate, "input": TEXT,
                "note": f"litellm.speech(model='openai/tts-1', voice='alloy'), default response_format; "
                        f"got {ctype} ({codec}), {len(data)} bytes"}

    run_call(calls, "transcription", "transcription", transcription("openai/whisper-1"))
    run_call(calls, "transcription_gpt_4o_transcribe", "transcription", transcription("openai/gpt-4o-transcribe"))
    run_call(calls, "speech", "speech", speech)

    return finish(out, "litellm", {p: version(p) for p in ("litellm", "openai", "av")}, calls)


if __name__ == "__main__":
    sys.exit(main())
