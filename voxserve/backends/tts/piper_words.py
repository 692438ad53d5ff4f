"""Which of a Piper sentence's phoneme ids speak which word of its text.

espeak-ng separates words by spaces in its phonemes but sometimes joins short ones ("of a" -> ``əvə``) or
splits them. When the space-separated groups match the text's words one to one they are the words; otherwise
each word is phonemized on its own, its phonemes are matched against the sentence's (``difflib``) and it goes
to the group most of them matched (in order); a group of several words is shared by their phoneme counts.
Spaces and punctuation belong to no word: they are the gaps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from difflib import SequenceMatcher

_WORD = re.compile(r"\[\[[^\[\]]*\]\]|[^\s\[\]]+")
_GAPS = frozenset(" ,.!?;:\"'()-…—–")
_STRESS = frozenset("ˈˌ")
_PUNCTUATION = "\"'()[]{},.!?;:…—–“”‘’«»"
Span = tuple[str, int, int]
"""(word, index of its first phoneme id, index one past its last id, the PAD after it included)."""


def text_words(text: str) -> list[str]:
    """The words of ``text`` that carry speech, punctuation around them stripped (a ``[[ phonemes ]]`` block is
    one word)."""
    found = [w if w.startswith("[[") else w.strip(_PUNCTUATION) for w in _WORD.findall(text)]
    return [w for w in found if w.startswith("[[") or any(c.isalnum() for c in w)]


def id_positions(phonemes: Sequence[str], id_map: Mapping[str, Sequence[int]]) -> list[tuple[int, int]]:
    """Each phoneme's (first id, one past its PAD) in Piper's ids: ``^ _`` first, then every known phoneme's
    ids and a PAD (unknown phonemes get no ids, like ``piper.phoneme_ids.phonemes_to_ids``)."""
    at = len(id_map["^"]) + len(id_map["_"])
    out = []
    for p in phonemes:
        n = len(id_map[p]) + len(id_map["_"]) if p in id_map else 0
        out.append((at, at + n))
        at += n
    return out


def word_spans(
    words: Sequence[str],
    sentences: Sequence[Sequence[str]],
    positions: Sequence[Sequence[tuple[int, int]]],
    phonemize: Callable[[str], list[list[str]]],
) -> list[list[Span]]:
    """For each sentence (its phonemes and :func:`id_positions`), the words it speaks with their id spans."""
    owners = _owners(words, sentences, phonemize)
    out: list[list[Span]] = []
    for s, (phonemes, pos) in enumerate(zip(sentences, positions, strict=True)):
        spans: dict[int, list[int]] = {}
        for i in range(len(phonemes)):
            w = owners.get((s, i))
            if w is not None and pos[i][1] > pos[i][0]:
                first, last = spans.setdefault(w, [pos[i][0], pos[i][1]])
                spans[w] = [min(first, pos[i][0]), max(last, pos[i][1])]
        out.append([(words[w], a, b) for w, (a, b) in sorted(spans.items())])
    return out


def _groups(sentences: Sequence[Sequence[str]]) -> list[list[tuple[int, int]]]:
    """The space-separated phoneme groups of all sentences: lists of (sentence, phoneme index), gaps left out."""
    groups: list[list[tuple[int, int]]] = []
    for s, phonemes in enumerate(sentences):
        current: list[tuple[int, int]] = []
        for i, p in enumerate(phonemes):
            if p == " ":
                if current:
                    groups.append(current)
                current = []
            elif p not in _GAPS:
                current.append((s, i))
        if current:
            groups.append(current)
    return groups


def _owners(
    words: Sequence[str], sentences: Sequence[Sequence[str]], phonemize: Callable[[str], list[list[str]]]
) -> dict[tuple[int, int], int]:
    """(sentence, phoneme index) -> the index of the word it speaks."""
    groups = _groups(sentences)
    if len(groups) == len(words):
        return {key: w for w, group in enumerate(groups) for key in group}
    alone = [[p for s in phonemize(word) for p in s if p != " " and p not in _GAPS | _STRESS] for word in words]
    flat = [(g, key) for g, group in enumerate(groups) for key in group if sentences[key[0]][key[1]] not in _STRESS]
    matcher = SequenceMatcher(None, [p for a in alone for p in a], [sentences[s][i] for _, (s, i) in flat],
                              autojunk=False)
    word_of = [w for w, a in enumerate(alone) for _ in a]
    votes: list[dict[int, int]] = [{} for _ in words]
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            g = flat[block.b + k][0]
            votes[word_of[block.a + k]][g] = votes[word_of[block.a + k]].get(g, 0) + 1
    group_of: list[int] = []
    for w in range(len(words)):  # each word in the group most of its phonemes matched, in order
        g = max(votes[w], key=lambda k: votes[w][k]) if votes[w] else (group_of[-1] if group_of else 0)
        group_of.append(max(g, group_of[-1]) if group_of else g)
    owner: dict[tuple[int, int], int] = {}
    for g, group in enumerate(groups):
        mine = [w for w in range(len(words)) if group_of[w] == g] or [max((w for w in range(len(words))
                                                                           if group_of[w] < g), default=0)]
        weights = [max(1, len(alone[w])) for w in mine]  # a joined group is shared by its words' phoneme counts
        total, done, k = sum(weights), 0, 0
        for j, key in enumerate(group):
            while k < len(mine) - 1 and j >= round((done + weights[k]) * len(group) / total):
                done += weights[k]
                k += 1
            owner[key] = mine[k]
    return owner
