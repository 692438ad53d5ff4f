"""Words a phrase cannot stop on ("... has a", "... the password of"): no place to end a user's turn, nor to cut
speech that is still arriving into a first piece to say."""

from __future__ import annotations

import re

INCOMPLETE_ENDINGS = frozenset(
    "a an the and or but so because if then than that which who whom whose what when where while to of in on "
    "at by for with from into about as is are was were be been am my your his her our their its this these "
    "those i we you he she they it um uh er like also not no very just please has have had".split()
)
"""Articles, conjunctions, prepositions, pronouns, auxiliaries and fillers: more must follow them."""
_WORD = re.compile(r"[\w']+")


def dangling(text: str) -> bool:
    """Whether ``text`` ends on a word that needs more after it ("... has a", "... password of")."""
    words = _WORD.findall(text.lower())
    return bool(words) and words[-1] in INCOMPLETE_ENDINGS
