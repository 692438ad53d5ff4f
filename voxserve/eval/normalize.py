"""Text normalization applied to references and hypotheses before computing error rates.

Error rates only mean something when both sides are written the same way, so the reference and the hypothesis
pass through the same deterministic normalizer.

``normalize_english`` is the Whisper English normalizer, ``EnglishTextNormalizer`` from the
``whisper-normalizer`` package: the normalizer of the Whisper paper (appendix C) that the Open ASR Leaderboard
scores with, so English WERs measured here sit beside the leaderboard's. It lowercases; removes text in
brackets and parentheses and the hesitations hmm, mm, mhm, mmm, uh, um; expands contractions ("won't" ->
"will not", "it's" -> "it is") and titles ("mr" -> "mister", "dr" -> "doctor"); writes spelled-out numbers
as digits ("twenty one" -> "21", "nineteen sixty one" -> "1961", "five percent" -> "5%", "five dollars" ->
"$5"); turns British spellings into American ones ("colour" -> "color"); and removes diacritics, punctuation
and symbols not part of a number.

On top of it, two voxserve rules. First, more hesitations are removed, so that fillers are not scored
(as the README promises) whichever way a reference spells them (``mfa_uhum`` in the corpus reads "uh um uh hm
hm um"): uhm, hm, er, erm, eh, ehm, ah, and lengthened spellings of these and of the package's own ("ummm",
"uhhh", "hmmm", "mmhmm", "ahh"). Removing them before the package reads numbers keeps "twenty er one" as "21".
Second, a token with no letter or digit is dropped: the package leaves a "." of text that ends in "..." ("wait..."
-> "wait ."), which would count as a word. The output is words separated by single spaces, with no leading or
trailing space.

Behaviour of the package, kept so that figures stay comparable: all text in parentheses is removed, spoken or
not; a run of spelled digits joins into one number ("one two three" -> "123") while written digits stay
apart ("1, 2, 3" -> "one 2 3"); "ok" and "okay", "yknow" and "you know", "alright" and "all right" stay
different words; "&" is removed, not read as "and".

``normalize_basic`` is for other languages: the package's ``BasicTextNormalizer`` (lowercase; text in
brackets and parentheses removed; NFKC; punctuation and symbols become spaces) with combining marks kept, so
that scripts written with vowel signs (Devanagari, Thai) keep them. ``character_tokens`` splits normalized
text into characters (combining marks stay with their base character; whitespace is skipped) to compute a
character error rate for languages written without spaces, such as Japanese or Chinese.
"""

from __future__ import annotations

import re
import unicodedata

from whisper_normalizer.basic import BasicTextNormalizer
from whisper_normalizer.english import EnglishTextNormalizer

__all__ = ["character_tokens", "normalize_basic", "normalize_english"]

_ENGLISH = EnglishTextNormalizer()
_BASIC = BasicTextNormalizer(preserve_marks=True)

# uh uhh | um umm uhm | hm hmm | mm mmm | mhm mmhmm | er | erm | eh ehm | ah ahh
_HESITATION_RE = re.compile(r"\b(?:u+h+|u+h*m+|h+m+|m{2,}|m+h+m+|e+r|e+r+m+|e+h+m*|a+h+)\b", re.IGNORECASE)


def normalize_english(text: str) -> str:
    """Normalize English text for WER scoring: voxserve's hesitations removed, the Whisper normalizer, no
    token without a letter or digit.

    Args:
        text: a reference or hypothesis transcript, in any casing and punctuation.

    Returns:
        Lowercase words separated by single spaces; an empty string when nothing scorable remains.

    Example:
        >>> normalize_english("Mr. Smith's colour, er, cost five dollars in nineteen sixty-one!")
        'mister smith is color cost $5 in 1961'
    """
    words = _ENGLISH(_HESITATION_RE.sub(" ", text)).split()
    return " ".join(word for word in words if any(char.isalnum() for char in word))


def normalize_basic(text: str) -> str:
    """Language-independent normalization: the Whisper basic normalizer, combining marks kept.

    Args:
        text: a transcript in any language.

    Returns:
        Lowercase words separated by single spaces; an empty string when nothing remains.
    """
    return " ".join(_BASIC(text).split())


def character_tokens(text: str) -> list[str]:
    """Split text into characters for a character error rate (CER).

    The text is not normalized here: pass it through a normalizer first. Whitespace is skipped, and a
    combining mark stays with the character before it, so "e" + U+0301 counts as one character.

    Args:
        text: normalized text, typically from ``normalize_basic``.

    Returns:
        One string per character, in order.
    """
    tokens: list[str] = []
    after_space = True
    for char in text:
        if char.isspace():
            after_space = True
            continue
        if tokens and not after_space and unicodedata.category(char).startswith("M"):
            tokens[-1] += char
        else:
            tokens.append(char)
        after_space = False
    return tokens
