"""``voxserve speak``: synthesize text or a text file to an audio file (format from the extension).

Transport only: parse arguments, build the engine, call the TTS service, write the file. The summary goes to
stderr so that ``-o -`` can write audio to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from voxserve.audio.encode import ENCODINGS, encode_audio
from voxserve.cli.common import output_format
from voxserve.config import load_settings
from voxserve.errors import InvalidInput
from voxserve.formats import to_vtt
from voxserve.service import Voxserve
from voxserve.streaming.tts import SpeakOptions
from voxserve.streaming.tts_service import SynthesisResult
from voxserve.text.lexicon import EMPTY_LEXICON, Lexicon
from voxserve.types import Priority, Segment, Transcript, Word, s_to_samples


def add_speak_command(sub: Any) -> None:
    """Register ``speak`` on the CLI."""
    p = sub.add_parser("speak", help="synthesize speech from text or a text file")
    p.add_argument("text", nargs="?", help="the text to speak (or use --file)")
    p.add_argument("--file", help="read the text from this UTF-8 file ('-' for stdin)")
    p.add_argument("-o", "--output", required=False, help="output file: .wav .mp3 .flac .opus/.ogg .pcm ('-' = stdout)")
    p.add_argument("--format", choices=ENCODINGS, help="audio format (default: from the output extension, else wav)")
    p.add_argument("--voice", help="voice name or Piper .onnx path (default: the configured voice)")
    p.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.25 to 4.0")
    p.add_argument("--ssml", action="store_true",
                   help="read the text as SSML even without a <speak> root (text starting with <speak> always is)")
    p.add_argument("--lexicon", help="pronunciations: a JSON object or word<TAB>respelling lines (over the "
                   "server's tts.lexicon_file)")
    p.add_argument("--timestamps", nargs="?", const="", metavar="PATH",
                   help="write the spoken words' start/end seconds as JSON (default: beside the audio, "
                   "OUTPUT.words.json; with -o - give the path), or captions when PATH ends in .vtt")
    p.add_argument("--list-voices", action="store_true", help="list the available voices and exit")
    p.add_argument("--config", help="settings file (TOML or JSON)")
    p.add_argument("--quiet", action="store_true", help="no summary on stderr")
    p.set_defaults(func=cmd_speak)


def _read_text(args: argparse.Namespace) -> str:
    if args.file and args.text:
        raise InvalidInput("give the text or --file, not both")
    if args.file == "-":
        return sys.stdin.read()
    if args.file:
        path = Path(args.file)
        if not path.is_file():
            raise InvalidInput(f"{path} does not exist", param="file")
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{path} is not UTF-8 text: {exc}", param="file") from exc
    if args.text is None:
        raise InvalidInput("give the text to speak or --file FILE")
    return str(args.text)


def _words_path(output: str, timestamps: str | None) -> Path | None:
    """Where ``--timestamps`` writes the words (None: not asked)."""
    if timestamps is None:
        return None
    if timestamps:
        return Path(timestamps)
    if output == "-":
        raise InvalidInput("with -o - give --timestamps a path for the words", param="timestamps")
    return Path(f"{output}.words.json")


def _words_file(result: SynthesisResult, vtt: bool) -> str:
    """The spoken words as ``{"words": [{word, start, end}]}`` JSON, or as WebVTT captions shaped like a
    transcript's (line width, lines, cue length)."""
    if not vtt:
        words = [{"word": w.text, "start": round(w.start_s, 3), "end": round(w.end_s, 3)} for w in result.words]
        return json.dumps({"words": words}, ensure_ascii=False, indent=1) + "\n"
    timed = tuple(Word(w.text, s_to_samples(w.start_s), s_to_samples(w.end_s)) for w in result.words)
    text = " ".join(w.text for w in timed)
    segment = Segment(0, timed[0].start if timed else 0, timed[-1].end if timed else 0, text, timed)
    return to_vtt(Transcript(text, "", s_to_samples(result.duration_s), (segment,) if timed else ()))


def cmd_speak(args: argparse.Namespace) -> int:
    """Synthesize and write the audio file."""
    vox = Voxserve(load_settings(args.config))
    try:
        tts = vox.tts()
        if args.list_voices:
            for v in tts.voices():
                aliases = ", ".join(tts.pool.catalog.aliases(v.name))
                print(f"{v.name}\t{v.language}\t{v.sample_rate} Hz\t{v.backend}\t{v.description}"
                      + (f"\t(aliases: {aliases})" if aliases else ""))
            return 0
        if not args.output:
            raise InvalidInput("give an output file with -o (or -o - for stdout)", param="output")
        fmt = output_format(args.output, args.format)
        words_path = _words_path(args.output, args.timestamps)
        text = _read_text(args)
        lexicon = Lexicon.load(args.lexicon, "lexicon") if args.lexicon else EMPTY_LEXICON
        options = SpeakOptions(speed=args.speed, priority=Priority.OFFLINE, ssml=True if args.ssml else None,
                               pronunciations=lexicon.entries)
        started = time.monotonic()
        result = asyncio.run(tts.synthesize(text, args.voice, options))
        wall = time.monotonic() - started
        data = encode_audio(result.audio, result.sample_rate, fmt)
    finally:
        vox.close()
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        Path(args.output).write_bytes(data)
    if words_path is not None:
        words_path.write_text(_words_file(result, words_path.suffix.lower() == ".vtt"), encoding="utf-8")
    if not args.quiet:
        s = result.stats
        ttfb = f"{s.ttfb_s * 1000:.0f} ms" if s.ttfb_s is not None else "-"
        print(f"{result.voice}: audio {result.duration_s:.1f} s, wall {wall:.2f} s (voice load included), "
              f"first audio {ttfb}, {result.duration_s / wall if wall > 0 else 0:.1f}x real time", file=sys.stderr)
    return 0
