"""What every compatibility client script shares (stdlib and PyAV only: every client venv has both).

A script is run as ``ENV_PYTHON clients/<name>_client.py --base-url URL --clip PATH --out DIR``; its folder is
on ``sys.path``, so it imports this module as ``common``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import wave
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import av

TEXT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
"""What every speech call synthesizes."""
TIMEOUT_S = 120.0
"""The longest any one call may take."""


def parse_args() -> argparse.Namespace:
    """``--base-url``, ``--clip`` and ``--out`` (the output folder, created)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--clip", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def decode_pcm16(path: str, rate: int) -> bytes:
    """An audio file as mono s16le at ``rate`` (decoded and resampled with PyAV)."""
    out = bytearray()
    with av.open(path) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        for frame in container.decode(audio=0):
            for f in resampler.resample(frame):
                out += f.to_ndarray().tobytes()
        for f in resampler.resample(None):
            out += f.to_ndarray().tobytes()
    return bytes(out)


def write_wav(path: Path, pcm: bytes, rate: int) -> None:
    """Raw mono s16le as a WAV file at the rate the client says the audio has."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)


def _record(calls: list[dict[str, Any]], name: str, kind: str, fields: dict[str, Any] | None, error: str | None,
            started: float) -> None:
    rec: dict[str, Any] = {"name": name, "kind": kind, "ok": False, "error": error}
    if error is None and fields is not None:
        rec.update(fields)
        rec["ok"] = rec.get("error") is None
    rec["seconds"] = round(time.monotonic() - started, 2)
    calls.append(rec)
    print(f"{name}: {'ok' if rec['ok'] else 'FAIL ' + str(rec['error'])} ({rec['seconds']} s)", flush=True)


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def run_call(calls: list[dict[str, Any]], name: str, kind: str, fn: Callable[[], dict[str, Any]]) -> None:
    """Run a blocking call (returning the record's fields) under a watchdog thread; record what happened."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["fields"] = fn()
        except BaseException as e:  # noqa: BLE001 - recorded, not raised
            box["error"] = error_text(e)

    started = time.monotonic()
    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(TIMEOUT_S)
    error = f"TimeoutError: no result after {TIMEOUT_S:.0f} s" if th.is_alive() else box.get("error")
    _record(calls, name, kind, box.get("fields"), error, started)


async def run_async_call(calls: list[dict[str, Any]], name: str, kind: str,
                         fn: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """The same for a coroutine, under ``asyncio.wait_for``."""
    started = time.monotonic()
    try:
        fields, error = await asyncio.wait_for(fn(), TIMEOUT_S), None
    except BaseException as e:  # noqa: BLE001 - recorded, not raised (a timeout too)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        fields, error = None, error_text(e)
    _record(calls, name, kind, fields, error, started)


def finish(out: Path, client: str, versions: dict[str, str], calls: list[dict[str, Any]]) -> int:
    """Write ``result.json``; the script's exit status (1 only when it cannot be written)."""
    try:
        (out / "result.json").write_text(json.dumps({"client": client, "versions": versions, "calls": calls},
                                                    indent=2))
    except OSError as e:
        print(f"cannot write result.json: {e}", file=sys.stderr)
        return 1
    return 0
