"""Corpus: documents split into sentences of lower-cased word tokens, with stop words marked.

The default tokenizer needs nothing beyond the standard library: sentences end at ``.``, ``!``, ``?`` (or a
line break) followed by white space; word tokens are runs of letters and digits with inner apostrophes or
hyphens (``don't``, ``well-being``), lower-cased. ``tokenizer="spacy"`` uses a spaCy pipeline (sentences
and lemmas) when spaCy and the model are installed. Pre-tokenised input (a list of token lists, or of
sentences of token lists, per document) is taken as given.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty._validation import check_int
from thrifty.text._embeddings import str_items

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*•])")
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")

#: A small English stop-word list (function words only), used by ``stop_words="english"``.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours yourself
    yourselves s t don't doesn't didn't isn't aren't wasn't weren't won't can't i'm it's that's there's
    we're they're you're i've we've they've you've i'll we'll they'll you'll i'd we'd they'd you'd""".split()
)

Tokens = list[str]


def simple_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (the default, dependency-free rule)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def simple_tokens(sentence: str) -> Tokens:
    """Lower-cased word tokens of one sentence (the default, dependency-free rule)."""
    return [m.group(0).lower().replace("’", "'") for m in _WORD.finditer(sentence)]


def _is_tokens(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(t, str) for t in x)


class Corpus:
    """Documents as sentences of word tokens (stop words removed), with the sentences' text kept.

    Parameters
    ----------
    texts : sequence of str, or of token lists, or of lists of token lists
        One entry per document: raw text, a pre-tokenised document (list of str: one sentence) or a
        list of sentences (each a list of str). Pre-tokenised tokens are used as given (no lower-casing).
    tokenizer : {"simple", "spacy"}, default="simple"
        ``"spacy"`` loads ``spacy_model`` and uses its sentences and lower-cased lemmas.
    stop_words : "english", iterable of str or None, default="english"
        Tokens dropped from every sentence (None keeps all).
    spacy_model : str, default="en_core_web_sm"
    min_token_length : int, default=1
        Shorter tokens are dropped.

    Attributes
    ----------
    docs : list of list of list of str
        ``docs[i][j]`` is the token list of sentence j of document i.
    sentences : list of list of str
        The text of every sentence (what snippets show).
    n_docs : int

    Raises
    ------
    TypeError
        ``texts`` is a single string or holds something other than str / token lists.
    ValueError
        Empty ``texts`` or an unknown ``tokenizer``.
    ImportError
        ``tokenizer="spacy"`` without spaCy or its model.

    Examples
    --------
    >>> from thrifty.text import Corpus
    >>> c = Corpus(["The food was great. Service was slow!", "Awful food."])
    >>> c.docs[0]
    [['food', 'great'], ['service', 'slow']]
    >>> c.sentences[0]
    ['The food was great.', 'Service was slow!']
    """

    def __init__(
        self,
        texts: Sequence[Any],
        *,
        tokenizer: Literal["simple", "spacy"] = "simple",
        stop_words: Literal["english"] | Iterable[str] | None = "english",
        spacy_model: str = "en_core_web_sm",
        min_token_length: int = 1,
    ) -> None:
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise TypeError(f"texts must be a sequence of documents (str or token lists), got {type(texts).__name__}")
        if len(texts) == 0:
            raise ValueError("texts must hold at least one document")
        if tokenizer not in ("simple", "spacy"):
            raise ValueError(f"tokenizer must be 'simple' or 'spacy', got {tokenizer!r}")
        min_token_length = check_int(min_token_length, "min_token_length", 1)
        self.stop_words: frozenset[str] = _stop_words(stop_words)
        split = _spacy_splitter(spacy_model) if tokenizer == "spacy" else None
        self.docs: list[list[Tokens]] = []
        self.sentences: list[list[str]] = []
        for i, doc in enumerate(texts):
            sents, toks = self._split(doc, i, split)
            keep = [[t for t in s if t not in self.stop_words and len(t) >= min_token_length] for s in toks]
            self.docs.append(keep)
            self.sentences.append(sents)
        self.tokenizer = tokenizer

    @staticmethod
    def _split(doc: Any, i: int, split: Any) -> tuple[list[str], list[Tokens]]:
        if isinstance(doc, str):
            if split is not None:
                return split(doc)  # type: ignore[no-any-return]
            sents = simple_sentences(doc)
            return sents, [simple_tokens(s) for s in sents]
        if _is_tokens(doc):
            return [" ".join(doc)], [list(doc)]
        if isinstance(doc, (list, tuple)) and all(_is_tokens(s) for s in doc):
            return [" ".join(s) for s in doc], [list(s) for s in doc]
        raise TypeError(f"texts[{i}] must be a str, a list of str or a list of lists of str, got {type(doc).__name__}")

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return len(self.docs)

    def __len__(self) -> int:
        return len(self.docs)

    def __repr__(self) -> str:
        n_tok = sum(len(s) for d in self.docs for s in d)
        return f"Corpus(n_docs={self.n_docs}, n_sentences={sum(map(len, self.docs))}, n_tokens={n_tok})"

    def counts(self) -> Counter[str]:
        """Token counts over the whole corpus (stop words excluded)."""
        c: Counter[str] = Counter()
        for d in self.docs:
            for s in d:
                c.update(s)
        return c

    def vocabulary(self, min_count: int = 1) -> list[str]:
        """Tokens seen at least ``min_count`` times, most frequent first (ties alphabetical).

        ``TypeError`` when ``min_count`` is not an int, ``ValueError`` when it is below 1."""
        min_count = check_int(min_count, "min_count", 1)
        return [w for w, n in sorted(self.counts().items(), key=lambda kv: (-kv[1], kv[0])) if n >= min_count]

    def fingerprint(self) -> str:
        """A hash of the tokens and sentences: results re-attach only to the corpus they came from."""
        h = hashlib.sha256()
        for d, sents in zip(self.docs, self.sentences):
            for toks in d:
                h.update("\x1f".join(toks).encode("utf-8") + b"\x1e")
            for text in sents:
                h.update(text.encode("utf-8") + b"\x1d")
            h.update(b"\x1c")
        return h.hexdigest()

    def contains(self, words: Iterable[str]) -> npt.NDArray[np.bool_]:
        """Per document: does it hold any of ``words``?"""
        ws = set(str_items(words, "words"))
        return np.array([any(t in ws for s in d for t in s) for d in self.docs], dtype=bool)


def _stop_words(stop_words: Any) -> frozenset[str]:
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise ValueError(f"stop_words must be 'english', an iterable of str or None, got {stop_words!r}")
        return ENGLISH_STOP_WORDS
    out = frozenset(stop_words)
    if not all(isinstance(w, str) for w in out):
        raise TypeError("stop_words must hold str only")
    return out


def _spacy_splitter(model: str) -> Any:
    try:
        spacy = importlib.import_module("spacy")
    except ImportError as exc:
        raise ImportError("tokenizer='spacy' needs spaCy (pip install spacy) and a model") from exc
    try:
        nlp = spacy.load(model)
    except OSError as exc:
        raise ImportError(f"tokenizer='spacy': the spaCy model {model!r} is not installed") from exc

    def split(text: str) -> tuple[list[str], list[Tokens]]:
        doc = nlp(text)
        sents = list(doc.sents)
        return [s.text.strip() for s in sents], [
            [t.lemma_.lower() for t in s if not (t.is_punct or t.is_space)] for s in sents
        ]

    return split
