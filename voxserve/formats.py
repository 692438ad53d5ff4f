"""Transcript output formats: txt, json, verbose_json (OpenAI's shape plus a ``voxserve`` block), srt, vtt,
diarized_json (OpenAI's shape: segments with speakers) and rttm; and diarization output (rttm, json).

Pure functions from :class:`~voxserve.types.Transcript` to text, shared by the CLI and the server.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from voxserve.errors import InvalidInput
from voxserve.languages import language_name
from voxserve.subtitles import DEFAULT_SUBTITLES, SubtitleOptions, shape_cues
from voxserve.types import (
    SAMPLE_RATE,
    AttemptReport,
    Diarization,
    Segment,
    SpeakerTurn,
    Transcript,
    Word,
)

FORMATS = ("txt", "text", "json", "verbose_json", "srt", "vtt", "diarized_json", "rttm")
DIARIZED_FORMATS = ("diarized_json", "rttm")
"""Formats that need a diarized transcript (speaker turns)."""
DIARIZATION_FORMATS = ("rttm", "json")
"""Formats of a :class:`~voxserve.types.Diarization` alone."""


def _r(x: float) -> float:
    return round(x, 3)


def word_dict(w: Word) -> dict[str, Any]:
    """A word as OpenAI returns it (``word``, ``start``, ``end``), plus probability and speaker when known."""
    d: dict[str, Any] = {"word": w.text, "start": _r(w.start_s), "end": _r(w.end_s), "probability": round(w.probability, 4)}
    if w.speaker is not None:
        d["speaker"] = w.speaker
    return d


def segment_dict(s: Segment, *, words: bool = True) -> dict[str, Any]:
    """A segment in OpenAI's verbose_json shape."""
    d: dict[str, Any] = {
        "id": s.id,
        "seek": 0,
        "start": _r(s.start_s),
        "end": _r(s.end_s),
        "text": s.text,
        "tokens": list(s.tokens),
        "temperature": s.temperature,
        "avg_logprob": round(s.avg_logprob, 4),
        "compression_ratio": round(s.compression_ratio, 4),
        "no_speech_prob": round(s.no_speech_prob, 4),
    }
    if s.speaker is not None:
        d["speaker"] = s.speaker
    if s.channel is not None:
        d["channel"] = s.channel
    if s.language is not None:
        d["language"] = language_name(s.language)  # as the transcript's own (a name: "german")
    if words:
        d["words"] = [word_dict(w) for w in s.words]
    return d


def voxserve_block(t: Transcript) -> dict[str, Any]:
    """Speed and guard statistics, reported beside OpenAI's fields."""
    st = t.stats
    return {
        "rtfx": round(t.rtfx, 2),
        "wall_s": round(st.wall_s, 3),
        "speech_s": round(st.speech_s, 3),
        "chunks": st.chunks,
        "retries": st.retries,
        "rechunks": st.rechunks,
        "guard_failures": st.guard_failures,
        "chunk_reports": [
            {
                "index": c.index,
                "start": _r(c.start / SAMPLE_RATE),
                "end": _r(c.end / SAMPLE_RATE),
                "attempts": c.attempts,
                "temperature": c.temperature,
                "rechunked": c.rechunked,
                "passed": c.passed,
                "reasons": list(c.reasons),
                "history": [_attempt_dict(a) for a in c.history],
            }
            for c in st.chunk_reports
        ],
    }


def _attempt_dict(a: AttemptReport) -> dict[str, Any]:
    """One decode of a chunk (or of a half of it) as verbose_json lists it."""
    d = dataclasses.asdict(a)
    d.update(start=_r(a.start / SAMPLE_RATE), end=_r(a.end / SAMPLE_RATE), reasons=list(a.reasons),
             avg_logprob=round(a.avg_logprob, 4), compression_ratio=round(a.compression_ratio, 3),
             no_speech_prob=round(a.no_speech_prob, 4))
    return d


def to_logprobs(t: Transcript) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs``: each decoded token of the text, in order, with its log-probability and bytes
    (empty for words the recogniser did not align, such as those of a chunk decoded without word timing)."""
    return [{"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.raw)}
            for w in t.words for lp in w.logprobs]


def to_verbose_json(t: Transcript, *, words: bool = True, segments: bool = True) -> dict[str, Any]:
    """OpenAI's verbose_json object for a transcript."""
    d: dict[str, Any] = {
        "task": t.task,
        "language": language_name(t.language),
        "duration": _r(t.duration_s),
        "text": t.text,
    }
    if segments:
        d["segments"] = [segment_dict(s, words=words) for s in t.segments]
    if words:
        d["words"] = [word_dict(w) for w in t.words]
    if t.diarization is not None:
        d["diarization"] = diarization_dict(t.diarization)
    d["voxserve"] = voxserve_block(t)
    return d


def _timestamp(seconds: float, sep: str) -> str:
    ms = max(0, int(round(seconds * 1000)))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def to_srt(t: Transcript, subtitles: SubtitleOptions = DEFAULT_SUBTITLES) -> str:
    """SubRip subtitles, cues shaped by ``subtitles`` (:func:`voxserve.subtitles.shape_cues`), each led by
    ``[speaker] `` when the transcript has speakers and labels are on."""
    cues = []
    for i, c in enumerate(shape_cues(t, subtitles), start=1):
        label = f"[{c.speaker}] " if c.speaker and subtitles.speaker_labels else ""
        text = label + "\n".join(c.lines)
        cues.append(f"{i}\n{_timestamp(c.start / SAMPLE_RATE, ',')} --> {_timestamp(c.end / SAMPLE_RATE, ',')}\n{text}\n")
    return "\n".join(cues)


def to_vtt(t: Transcript, subtitles: SubtitleOptions = DEFAULT_SUBTITLES) -> str:
    """WebVTT subtitles, cues shaped by ``subtitles``; the speaker as a voice tag (``<v A>``) when known and
    labels are on."""
    cues = ["WEBVTT\n"]
    for c in shape_cues(t, subtitles):
        label = f"<v {c.speaker}>" if c.speaker and subtitles.speaker_labels else ""
        text = label + "\n".join(c.lines)
        cues.append(f"{_timestamp(c.start / SAMPLE_RATE, '.')} --> {_timestamp(c.end / SAMPLE_RATE, '.')}\n{text}\n")
    return "\n".join(cues)


_WRITERS: dict[str, Callable[[Transcript], str]] = {
    "txt": lambda t: t.text + "\n",
    "text": lambda t: t.text + "\n",
    "json": lambda t: json.dumps({"text": t.text}, ensure_ascii=False) + "\n",
    "verbose_json": lambda t: json.dumps(to_verbose_json(t), ensure_ascii=False, indent=2) + "\n",
    "diarized_json": lambda t: json.dumps(to_diarized_json(t), ensure_ascii=False, indent=2) + "\n",
}


def render(t: Transcript, fmt: str, file_id: str = "audio", *, subtitles: SubtitleOptions | None = None) -> str:
    """The transcript in one of :data:`FORMATS` (``file_id``: the file name field of RTTM; ``subtitles``:
    how srt and vtt cues are shaped, default :class:`~voxserve.subtitles.SubtitleOptions`)."""
    if fmt == "rttm":
        return to_rttm(_turns_of(t), file_id)
    if fmt in ("srt", "vtt"):
        return (to_srt if fmt == "srt" else to_vtt)(t, subtitles or DEFAULT_SUBTITLES)
    writer = _WRITERS.get(fmt)
    if writer is None:
        raise InvalidInput(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", param="response_format")
    return writer(t)


def extension(fmt: str) -> str:
    """The file extension for a format."""
    return {"text": "txt", "verbose_json": "json", "diarized_json": "json"}.get(fmt, fmt)


# ------------------------------------------------------------------------------------- diarization


def _turns_of(t: Transcript) -> Diarization:
    if t.diarization is None:
        raise InvalidInput("this format needs speakers: transcribe with diarization", param="response_format")
    return t.diarization


def to_diarized_json(t: Transcript) -> dict[str, Any]:
    """OpenAI's ``diarized_json``: segments of one speaker each (``type``, ``id``, ``start``, ``end``,
    ``text``, ``speaker``) plus the duration-based usage."""
    _turns_of(t)
    return {
        "task": "transcribe",
        "duration": _r(t.duration_s),
        "text": t.text,
        "segments": [
            {"type": "transcript.text.segment", "id": f"seg_{s.id:03d}", "start": _r(s.start_s), "end": _r(s.end_s),
             "text": s.text, "speaker": s.speaker or ""}
            for s in t.segments
        ],
        "usage": {"type": "duration", "seconds": int(round(t.duration_s))},
    }


def to_rttm(d: Diarization, file_id: str = "audio") -> str:
    """RTTM, one ``SPEAKER file 1 start duration <NA> <NA> speaker <NA> <NA>`` line per turn."""
    uri = "_".join(file_id.split()) or "audio"
    return "".join(
        f"SPEAKER {uri} 1 {t.start_s:.3f} {t.end_s - t.start_s:.3f} <NA> <NA> {t.speaker} <NA> <NA>\n"
        for t in d.turns
    )


def turn_dict(t: SpeakerTurn) -> dict[str, Any]:
    """A turn as JSON: speaker, start, end (seconds)."""
    return {"speaker": t.speaker, "start": _r(t.start_s), "end": _r(t.end_s)}


def diarization_dict(d: Diarization) -> dict[str, Any]:
    """A diarization as JSON: duration, speakers, turns, and a ``voxserve`` block with speed per stage."""
    return {
        "duration": _r(d.duration_s),
        "speakers": list(d.speakers),
        "turns": [turn_dict(t) for t in d.turns],
        "voxserve": {
            "rtfx": round(d.rtfx, 2),
            "wall_s": round(d.stats.wall_s, 3),
            "stages": {name: round(s, 3) for name, s in d.stats.stages},
            "windows": d.stats.windows,
            "embeddings": d.stats.embeddings,
        },
    }


def render_diarization(d: Diarization, fmt: str, file_id: str = "audio") -> str:
    """A diarization in one of :data:`DIARIZATION_FORMATS`."""
    if fmt == "rttm":
        return to_rttm(d, file_id)
    if fmt == "json":
        return json.dumps(diarization_dict(d), ensure_ascii=False, indent=2) + "\n"
    raise InvalidInput(f"unknown format {fmt!r}; choose one of {', '.join(DIARIZATION_FORMATS)}", param="response_format")


def text_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A fixed-width text table (benchmark and plan reports)."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)
