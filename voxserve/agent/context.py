"""Retrieval context for the agent: a knowledge folder (txt/md) and the conversation, embedded and searched.

Documents are cut into passages (a heading's sentences, up to a few hundred characters). At each turn the
user's words are embedded once and searched against the passages and the earlier exchanges that no longer fit
in the prompt's history. A tiny LLM answers well from one short relevant sentence and badly from a page, so
each retrieved passage is then *compressed* to its sentences closest to the question, under the passage's
heading; the result goes into the prompt right before the question (see :mod:`voxserve.agent.prompt`).

Blocking code only (embedding); the cascade calls it through the engine's executor.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from voxserve.errors import InvalidInput
from voxserve.types import Float32Array

log = logging.getLogger(__name__)

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"(\*\*|__|`+|~~|<[^>]{1,40}>)")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+")
_REFERRING = frozenset("it its it's this that these those they them their there he him his she her".split())
_CONTINUING = frozenset("after it its this that these they their she he his her then otherwise however but also".split())
_COMMON = frozenset(
    "that this with from have they will would there their what when where which while about after before "
    "other some more most than then them these those very also only into over such your just like been were "
    "does each every here must should could can't don't it's".split()
)


class TextEmbedder(Protocol):
    """Texts -> L2-normalised vectors (blocking; see ``voxserve.backends.text.minilm``)."""

    @property
    def dim(self) -> int:
        """Size of one embedding."""
        ...

    def embed(self, texts: Sequence[str]) -> Float32Array:
        """One unit-length row per text, in order."""
        ...


@dataclass(frozen=True)
class ChunkParams:
    """How a knowledge folder is read and cut.

    Attributes:
        max_chars: the longest passage (sentences are packed up to this; a longer sentence is cut at a space).
        max_file_bytes: larger files are skipped (with a warning).
        max_passages: the most passages one folder may give.
        extensions: the file types read.
    """

    max_chars: int = 280
    max_file_bytes: int = 2_000_000
    max_passages: int = 20_000
    extensions: tuple[str, ...] = (".md", ".markdown", ".txt")


@dataclass(frozen=True)
class Passage:
    """A piece of a document: ``title`` is its heading path (or the file name), ``sentences`` its text."""

    source: str
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        """The passage's sentences."""
        return " ".join(self.sentences)

    @property
    def short_title(self) -> str:
        """The innermost heading."""
        return self.title.rsplit(" / ", 1)[-1]

    def prompt_text(self, keep: Sequence[int] | None = None) -> str:
        """The passage as the LLM sees it, its innermost heading first so that "It opens at 8" keeps its
        subject; ``keep`` selects sentences (every prompt token costs prefill time on a CPU)."""
        chosen = self.sentences if keep is None else [self.sentences[i] for i in keep]
        text = " ".join(chosen)
        return f"{self.short_title}: {text}" if self.short_title else text


@dataclass(frozen=True)
class Hit:
    """A retrieved passage, its cosine similarity to the query, and its sentences kept for the prompt."""

    passage: Passage
    score: float
    keep: tuple[int, ...] | None = None

    @property
    def prompt_text(self) -> str:
        """What goes into the prompt."""
        return self.passage.prompt_text(self.keep)


@dataclass(frozen=True)
class RetrievalParams:
    """Which hits reach the prompt.

    Attributes:
        top_k: the most knowledge passages per turn.
        min_score: hits below this cosine similarity are dropped (small talk gets no facts).
        margin: hits more than this below the best one are dropped (a near miss distracts a small model).
        sentence_margin: a passage keeps its sentences within this of its sentence closest to the question.
        memory_k: the most earlier exchanges recalled per turn.
        memory_min_score: the least similarity of a recalled exchange.
    """

    top_k: int = 2
    min_score: float = 0.3
    margin: float = 0.08
    sentence_margin: float = 0.1
    memory_k: int = 1
    memory_min_score: float = 0.45

    def __post_init__(self) -> None:
        if self.top_k < 0 or self.memory_k < 0:
            raise InvalidInput("top_k and memory_k must not be negative", param="top_k")


# ------------------------------------------------------------------------------------------- chunking


def clean_markup(text: str) -> str:
    """Markdown links, emphasis, code ticks and small HTML tags removed; whitespace collapsed."""
    text = _LINK.sub(r"\1", text)
    return " ".join(_MARKUP.sub("", text).split())


def split_passages(text: str, source: str, params: ChunkParams = ChunkParams()) -> list[Passage]:
    """Cut one document into passages: markdown headings give titles; paragraphs and list items are split
    into sentences and packed up to ``max_chars`` without crossing a heading or a paragraph."""
    passages: list[Passage] = []
    headings: list[tuple[int, str]] = []
    paragraph: list[str] = []

    def close_paragraph() -> None:
        if paragraph:
            title = " / ".join(h for _, h in headings) or Path(source).stem.replace("_", " ")
            passages.extend(Passage(source, title, tuple(t)) for t in _pack(paragraph, params.max_chars))
            paragraph.clear()

    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            close_paragraph()
            level = len(heading.group(1))
            headings = [h for h in headings if h[0] < level] + [(level, clean_markup(heading.group(2)))]
        elif not line.strip():
            close_paragraph()
        else:
            bullet = _BULLET.match(line)
            item = clean_markup(line[bullet.end():] if bullet else line)
            if item:
                paragraph.extend(_sentences(item))
    close_paragraph()
    return passages


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _pack(sentences: list[str], max_chars: int) -> list[list[str]]:
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for sentence in sentences:
        for piece in _hard_split(sentence, max_chars):
            if current and size + 1 + len(piece) > max_chars:
                out.append(current)
                current, size = [], 0
            current.append(piece)
            size += len(piece) + (1 if size else 0)
    if current:
        out.append(current)
    return out


def _hard_split(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars)
        cut = cut if cut > max_chars // 2 else max_chars
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    return [*pieces, sentence] if sentence else pieces


def read_folder(folder: str | Path, params: ChunkParams = ChunkParams()) -> list[Passage]:
    """Every passage of the text and markdown files under ``folder`` (recursively, in name order).

    Raises:
        InvalidInput: the folder does not exist or holds no usable text.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InvalidInput(f"knowledge folder {root} does not exist", param="knowledge")
    passages: list[Passage] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in params.extensions):
        if path.stat().st_size > params.max_file_bytes:
            log.warning("skipping %s: larger than %d bytes", path, params.max_file_bytes)
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            log.warning("skipping %s: not UTF-8 text", path)
            continue
        passages.extend(split_passages(text, str(path.relative_to(root)), params))
        if len(passages) > params.max_passages:
            raise InvalidInput(f"knowledge folder {root} gives more than {params.max_passages} passages",
                               param="knowledge")
    if not passages:
        raise InvalidInput(f"knowledge folder {root} holds no .md or .txt text", param="knowledge")
    return passages


# ------------------------------------------------------------------------------------------- search


def is_follow_up(question: str) -> bool:
    """Whether a question leans on the turn before it: it starts with "and" or "what/how about", or refers
    back with a pronoun ("where is *that* office?", "what is *its* password?")."""
    words = [w.lower() for w in _WORDS.findall(question)]
    if not words:
        return False
    return words[0] == "and" or words[1:2] == ["about"] or any(w in _REFERRING for w in words)


def best_scores(scores: Float32Array, k: int, min_score: float) -> list[tuple[int, float]]:
    """Indices and values of the ``k`` highest scores that reach ``min_score``, best first (ties by index)."""
    if k <= 0 or not len(scores):
        return []
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [(int(i), float(scores[i])) for i in order if scores[i] >= min_score]


def top_hits(vectors: Float32Array, query: Float32Array, k: int, min_score: float) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to ``query`` (dot product of unit vectors) that reach ``min_score``."""
    return best_scores(vectors @ query, k, min_score) if len(vectors) else []


class KnowledgeBase:
    """The embedded passages (and their sentences) of a knowledge folder; read-only, shared by sessions."""

    def __init__(self, passages: Sequence[Passage], vectors: Float32Array, sentence_vectors: Float32Array,
                 folder: str = "") -> None:
        if len(passages) != len(vectors) or sum(len(p.sentences) for p in passages) != len(sentence_vectors):
            raise ValueError("one vector per passage and per sentence")
        self.passages = list(passages)
        self.vectors = vectors
        self.folder = folder
        offsets = np.cumsum([0] + [len(p.sentences) for p in passages])
        self._sentences = [sentence_vectors[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]

    @classmethod
    def build(cls, folder: str | Path, embedder: TextEmbedder, params: ChunkParams = ChunkParams()) -> KnowledgeBase:
        """Read, cut and embed a folder (blocking; about a hundred passages per second on one core)."""
        passages = read_folder(folder, params)
        vectors = embedder.embed([f"{p.title}. {p.text}" for p in passages])
        sentences = embedder.embed([f"{p.short_title}: {s}" for p in passages for s in p.sentences])
        log.info("knowledge: %d passages, %d sentences from %s", len(passages), len(sentences), folder)
        return cls(passages, vectors, sentences, str(folder))

    def keyterms(self, max_chars: int = 150) -> tuple[str, ...]:
        """Words recognition should favour in questions about this knowledge (a speech recogniser's prompt):
        the words the passages use most (``"wifi"`` is otherwise heard as "wife I"), then the headings, as many
        as fit in ``max_chars`` written as a comma list."""
        counts: dict[str, int] = {}
        for p in self.passages:
            for word in _WORDS.findall(p.text):
                if len(word) > 3 and word.lower() not in _COMMON:
                    counts[word.lower()] = counts.get(word.lower(), 0) + 1
        frequent = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        terms = [w for w, n in frequent[:8] if n > 1]
        for p in self.passages:
            if p.short_title not in terms:
                terms.append(p.short_title)
        out: list[str] = []
        for term in terms:
            if sum(len(t) + 2 for t in out) + len(term) > max_chars:
                break
            out.append(term)
        return tuple(out)

    def search(self, queries: Float32Array, params: RetrievalParams) -> list[Hit]:
        """The best passages for embedded queries (row 0: the question alone; others: with context): each
        passage scores its best similarity to any query, and keeps the sentences closest to the question."""
        if not len(self.vectors):
            return []
        scores = (self.vectors @ queries.T).max(axis=1)
        ranked = best_scores(scores, params.top_k, params.min_score)
        ranked = [(i, s) for i, s in ranked if s >= ranked[0][1] - params.margin]
        return [Hit(self.passages[i], s, self._keep(i, queries[0], params.sentence_margin)) for i, s in ranked]

    def _keep(self, index: int, question: Float32Array, margin: float) -> tuple[int, ...]:
        """The sentences closest to the question, each with the sentence after it when that one goes on
        from it ("After that, half is refunded.")."""
        scores = self._sentences[index] @ question
        sentences = self.passages[index].sentences
        keep = {int(i) for i in np.flatnonzero(scores >= scores.max() - margin)}
        for i in sorted(keep):
            if i + 1 < len(sentences):
                first = _WORDS.findall(sentences[i + 1][:20].lower())[:1]
                if first and first[0] in _CONTINUING:
                    keep.add(i + 1)
        return tuple(sorted(keep))


class Retriever:
    """One conversation's retrieval: knowledge passages plus its own earlier exchanges (blocking calls)."""

    def __init__(
        self, embedder: TextEmbedder, knowledge: KnowledgeBase | None, params: RetrievalParams = RetrievalParams()
    ) -> None:
        self.embedder = embedder
        self.knowledge = knowledge
        self.params = params
        self._memory: list[tuple[int, Passage]] = []
        self._memory_vectors = np.zeros((0, embedder.dim), np.float32)
        self._lock = threading.Lock()

    def search(self, query: str, recall_before: int = 0, previous: str = "") -> list[Hit]:
        """Hits for the user's words: knowledge passages (best ``top_k`` within ``margin`` of the best) and
        earlier exchanges numbered below ``recall_before`` (those no longer in the prompt's history).

        When the question is a follow-up (:func:`is_follow_up`) of the ``previous`` user turn, a passage
        scores the better of its similarity to the question alone and to both turns together, so "and where
        is that office?" finds the office of the question before it.
        """
        p = self.params
        if not query.strip():
            return []
        texts = [query, f"{previous} {query}"] if previous.strip() and is_follow_up(query) else [query]
        vectors = self.embedder.embed(texts)
        vector = vectors[0]
        hits = self.knowledge.search(vectors, p) if self.knowledge is not None else []
        with self._lock:
            old = [i for i, (n, _) in enumerate(self._memory) if n < recall_before]
            vectors = self._memory_vectors[old]
            recalled = [Hit(self._memory[old[i]][1], s) for i, s in top_hits(vectors, vector, p.memory_k,
                                                                              p.memory_min_score)]
        return hits + recalled  # best first: knowledge right before the question, recollections before it

    def remember(self, number: int, user: str, assistant: str) -> None:
        """Index exchange ``number`` (its user and assistant text) for recall once it leaves the history."""
        text = f"the user said: {user} You answered: {assistant}".strip()
        vector = self.embedder.embed([text])
        with self._lock:
            self._memory.append((number, Passage("conversation", "Earlier in this conversation", (text,))))
            self._memory_vectors = np.concatenate([self._memory_vectors, vector])
