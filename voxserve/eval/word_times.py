"""How close synthesized speech's word times are to an independent timing: the recogniser's word timestamps.

The text is spoken (its words timed from the voice's own durations), the audio is transcribed with word
timestamps, the two word lists are matched by their normalised text (``difflib``), and each matched word's
start (and end) time difference is one error. Only matched words count: a word the recogniser heard
differently ("birch canoe" -> "birch can use") has no independent time. Whisper starts a word where the word
before it ended (it places no gap between words), so its starts run early by the pause before each word; its
ends are the closer reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from voxserve.audio.resample import resample
from voxserve.eval.normalize import normalize_basic
from voxserve.service import Voxserve
from voxserve.stats import percentile
from voxserve.streaming.tts import SpeakOptions
from voxserve.types import SAMPLE_RATE, SpokenWord, Word

SENTENCES = (
    "She had your dark suit in greasy wash water all year.",
    "The horizon seems extremely distant.",
    "He began a confused complaint against the wizard who had vanished behind the curtain on the left.",
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "Dr. Smith paid $5.20 for 3 apples in 1999.",
    "The meeting starts at 10:30 am on May 3rd, and 50% of the team will come.",
)
"""Harvard sentences and normalisation cases, as the TTS tests speak them."""


@dataclass(frozen=True)
class WordTimeScore:
    """Start- and end-time errors of the matched words (seconds) out of the words spoken."""

    errors: tuple[float, ...]
    end_errors: tuple[float, ...]
    spoken: int

    @property
    def median_s(self) -> float:
        """Median absolute start error."""
        return percentile(self.errors, 50)

    @property
    def p90_s(self) -> float:
        """90th percentile of the absolute start errors."""
        return percentile(self.errors, 90)

    def report(self) -> str:
        """One line: matched words, median and p90 error."""
        return (f"{len(self.errors)}/{self.spoken} words matched, start error median {self.median_s:.3f} s, "
                f"p90 {self.p90_s:.3f} s; end error median {percentile(self.end_errors, 50):.3f} s, "
                f"p90 {percentile(self.end_errors, 90):.3f} s")


def matched(spoken: Sequence[SpokenWord], heard: Sequence[Word]) -> list[tuple[SpokenWord, Word]]:
    """The words both lists share, matched in order by their normalised text."""
    a = [normalize_basic(w.text) for w in spoken]
    b = [normalize_basic(w.text) for w in heard]
    return [(spoken[m.a + k], heard[m.b + k]) for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
            for k in range(m.size)]


async def score_word_times(vox: Voxserve, texts: Sequence[str], voice: str | None = None,
                           options: SpeakOptions | None = None) -> WordTimeScore:
    """Speak each text, transcribe its audio with word timestamps, and pool the start errors."""
    errors: list[float] = []
    end_errors: list[float] = []
    spoken = 0
    for text in texts:
        result = await vox.aspeak(text, voice, options or SpeakOptions())
        audio = resample(result.audio, result.sample_rate, SAMPLE_RATE)
        transcript = await vox.atranscribe(audio, language="en", word_timestamps=True)
        pairs = matched(result.words, transcript.words)
        errors += [abs(s.start_s - h.start_s) for s, h in pairs]
        end_errors += [abs(s.end_s - h.end_s) for s, h in pairs]
        spoken += len(result.words)
    return WordTimeScore(tuple(errors), tuple(end_errors), spoken)


def main() -> None:  # pragma: no cover - the benchmark's command line
    """Print the score of the TTS tests' sentences on the default voice and recogniser."""
    from voxserve.config import load_settings

    vox = Voxserve(load_settings())
    try:
        print(asyncio.run(score_word_times(vox, SENTENCES)).report())
    finally:
        vox.close()


if __name__ == "__main__":  # pragma: no cover
    main()
