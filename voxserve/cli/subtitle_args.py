"""The subtitle-shaping and channel flags of ``voxserve transcribe`` (srt and vtt cues; one speaker a channel)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from voxserve.subtitles import DEFAULT_SUBTITLES, SubtitleOptions


def add_subtitle_args(p: argparse.ArgumentParser) -> None:
    """``--max-line-width``, ``--max-line-count``, ``--max-cue-duration``, ``--[no-]speaker-labels`` and
    ``--split-channels``, read by :func:`subtitle_options` and the command."""
    d = DEFAULT_SUBTITLES
    p.add_argument("--max-line-width", type=int, metavar="N",
                   help=f"srt/vtt: characters per line (default {d.max_line_width})")
    p.add_argument("--max-line-count", type=int, metavar="N", help=f"srt/vtt: lines per cue (default {d.max_line_count})")
    p.add_argument("--max-cue-duration", type=float, metavar="S",
                   help=f"srt/vtt: seconds per cue (default {d.max_cue_duration_s:g})")
    p.add_argument("--speaker-labels", action=argparse.BooleanOptionalAction, default=None,
                   help="srt/vtt: lead each cue with its speaker ([A] text, <v A>) when there are speakers (default on)")
    p.add_argument("--split-channels", action="store_true",
                   help="one speaker a channel: transcribe each channel alone, speakers channel_0, channel_1, ... "
                   "(a mono file is channel_0)")


def subtitle_options(args: argparse.Namespace) -> SubtitleOptions:
    """The cue shape the flags of :func:`add_subtitle_args` ask for (defaults for the flags not given).

    Raises:
        InvalidInput: a value is out of range.
    """
    given = {"max_line_width": args.max_line_width, "max_line_count": args.max_line_count,
             "max_cue_duration_s": args.max_cue_duration, "speaker_labels": args.speaker_labels}
    return replace(DEFAULT_SUBTITLES, **{k: v for k, v in given.items() if v is not None})
