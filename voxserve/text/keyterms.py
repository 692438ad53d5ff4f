"""Custom vocabulary (key terms): parsing, the decoder's glossary prompt, and the check that a result only
copied the glossary.

Whisper has no biasing list; what it has is its previous-text prompt, which it tends to spell like. Key
terms go there as ``"Glossary: Term1, Term2."`` ahead of any user prompt. On silence or a short chunk
Whisper sometimes says the prompt instead of the audio; :func:`copies_glossary` spots that, and the
pipelines then decode the audio again without the glossary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from voxserve.errors import InvalidInput

MAX_TERMS = 100
MAX_TERM_CHARS = 50
GLOSSARY_LABEL = "Glossary:"


def parse_keyterms(values: Iterable[str], param: str = "keyterms") -> tuple[str, ...]:
    """Key terms from any number of values, each one term, a JSON list of terms or a comma-separated list;
    blanks and repeats (ignoring case) dropped, order kept.

    Raises:
        InvalidInput: a value is a malformed JSON list or holds a non-string, a term is longer than
            :data:`MAX_TERM_CHARS`, or there are more than :data:`MAX_TERMS`.
    """
    terms: list[str] = []
    for value in values:
        text = value.strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                raise InvalidInput(f"{param} is not a valid JSON list", param=param) from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise InvalidInput(f"{param} must be a list of strings", param=param)
            terms += items
        else:
            terms += text.split(",")
    out: dict[str, str] = {}
    for term in terms:
        clean = " ".join(term.split())
        if len(clean) > MAX_TERM_CHARS:
            raise InvalidInput(f"a key term is at most {MAX_TERM_CHARS} characters: {clean[:60]!r}", param=param)
        if clean:
            out.setdefault(clean.lower(), clean)
    if len(out) > MAX_TERMS:
        raise InvalidInput(f"at most {MAX_TERMS} key terms, not {len(out)}", param=param)
    return tuple(out.values())


def glossary(keyterms: Iterable[str]) -> str:
    """The glossary sentence of some key terms (empty without any)."""
    terms = [t for t in keyterms if t]
    return f"{GLOSSARY_LABEL} {', '.join(terms)}." if terms else ""


def glossary_prompt(keyterms: Iterable[str], prompt: str | None, max_chars: int | None = None) -> str | None:
    """The decoder prompt: the glossary first, then the prompt (its end kept when ``max_chars`` is short)."""
    head = glossary(keyterms)
    tail = (prompt or "").strip()
    if max_chars is not None:
        keep = max_chars - len(head) - (1 if head else 0)
        tail = tail[-keep:] if keep > 0 else ""
    return f"{head} {tail}".strip() or None


def copies_glossary(text: str, keyterms: Iterable[str]) -> bool:
    """Whether a result repeats the glossary rather than the audio: it says the word "glossary" (when no term
    has it), or two terms in a row in the glossary's order, or nothing but terms (a term said alone, as on
    silence). Loose on purpose: a false alarm costs one decode without the glossary, a miss leaks text."""
    terms = [_words(t) for t in keyterms]
    terms = [t for t in terms if t]
    said = _words(text)
    if not said or not terms:
        return False
    if "glossary" in said and not any("glossary" in t for t in terms):
        return True
    found = _term_runs(said, terms)
    if not found:
        return False
    covered = sum(len(terms[k]) for _, k in found)
    if covered == len(said):
        return True
    return any(b[0] == a[0] + len(terms[a[1]]) and b[1] == a[1] + 1 for a, b in zip(found, found[1:]))


def _term_runs(said: list[str], terms: list[list[str]]) -> list[tuple[int, int]]:
    """(position in ``said``, term index) of each term occurrence, left to right, longest term first."""
    found, i = [], 0
    while i < len(said):
        best = max((k for k, t in enumerate(terms) if said[i : i + len(t)] == t), key=lambda k: len(terms[k]),
                   default=None)
        if best is None:
            i += 1
            continue
        found.append((i, best))
        i += len(terms[best])
    return found


def _words(text: str) -> list[str]:
    return [w for w in re.sub(r"[^\w\s']", " ", text.lower()).split() if w]
