"""Corpus: the dependency-free tokenizer, stop words, pre-tokenised input, spaCy on request, bad input."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from thrifty.text import ENGLISH_STOP_WORDS, Corpus
from thrifty.text._corpus import simple_sentences, simple_tokens


def test_sentences_and_tokens() -> None:
    text = "Dr Smith's well-being improved! It didn't last. Why?\n\nA new paragraph 42 here"
    assert simple_sentences(text) == ["Dr Smith's well-being improved!", "It didn't last.", "Why?", "A new paragraph 42 here"]
    assert simple_tokens("Dr Smith’s well-being, improved_ok 42!") == ["dr", "smith's", "well-being", "improved", "ok", "42"]
    assert simple_tokens("—") == []


def test_stop_words_removed_and_sentences_kept() -> None:
    c = Corpus(["The cat sat on the mat. It was happy!"])
    assert c.docs == [[["cat", "sat", "mat"], ["happy"]]]
    assert c.sentences == [["The cat sat on the mat.", "It was happy!"]]
    keep_all = Corpus(["The cat sat."], stop_words=None)
    assert keep_all.docs == [[["the", "cat", "sat"]]]
    custom = Corpus(["The cat sat."], stop_words={"cat"})
    assert custom.docs == [[["the", "sat"]]]
    assert "the" in ENGLISH_STOP_WORDS and "cat" not in ENGLISH_STOP_WORDS
    assert Corpus(["a bb ccc"], stop_words=None, min_token_length=2).docs == [[["bb", "ccc"]]]


def test_pretokenised_input_is_used_as_given() -> None:
    c = Corpus([["Hello", "World"], [["one", "two"], ["three"]]], stop_words=None)
    assert c.docs == [[["Hello", "World"]], [["one", "two"], ["three"]]]
    assert c.sentences[1] == ["one two", "three"]
    assert c.n_docs == len(c) == 2


def test_counts_vocabulary_fingerprint_contains() -> None:
    c = Corpus(["b a a.", "c b a."], stop_words=None)
    assert c.counts() == {"a": 3, "b": 2, "c": 1}
    assert c.vocabulary() == ["a", "b", "c"] and c.vocabulary(min_count=2) == ["a", "b"]
    assert c.fingerprint() == Corpus(["b a a.", "c b a."], stop_words=None).fingerprint()
    assert c.fingerprint() != Corpus(["b a a.", "c b b."], stop_words=None).fingerprint()
    assert c.contains(["c"]).tolist() == [False, True]
    assert "n_docs=2" in repr(c)


@pytest.mark.parametrize(
    "texts,kwargs,exc,match",
    [
        ("just a string", {}, TypeError, "texts"),
        ([], {}, ValueError, "texts"),
        ([1, 2], {}, TypeError, r"texts\[0\]"),
        ([["ok"], [["a"], [3]]], {}, TypeError, r"texts\[1\]"),
        (["x"], {"tokenizer": "nltk"}, ValueError, "tokenizer"),
        (["x"], {"stop_words": "french"}, ValueError, "stop_words"),
        (["x"], {"stop_words": [1]}, TypeError, "stop_words"),
        (["x"], {"min_token_length": 0}, ValueError, "min_token_length"),
        (["x"], {"min_token_length": 2.0}, TypeError, "min_token_length"),
        (["x"], {"min_token_length": True}, TypeError, "min_token_length"),
    ],
)
def test_bad_input(texts: object, kwargs: dict[str, object], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        Corpus(texts, **kwargs)  # type: ignore[arg-type]


def test_sizes_and_word_lists_are_checked() -> None:
    # Found by a probe: vocabulary(min_count=0 / -1 / 2.5 / True) returned every token, contains("ab")
    # searched for "a" and "b", and a NumPy integer min_token_length was refused
    c = Corpus(["a bb ccc bb", "bb ccc dddd"], stop_words=None)
    assert c.vocabulary(min_count=np.int64(2)) == ["bb", "ccc"]
    assert Corpus(["a bb ccc"], stop_words=None, min_token_length=np.int64(2)).vocabulary() == ["bb", "ccc"]
    for bad, exc in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError), ("2", TypeError)):
        with pytest.raises(exc, match="min_count"):
            c.vocabulary(min_count=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"words must be an iterable of str, got str \(one word: \['bb'\]\)"):
        c.contains("bb")
    with pytest.raises(TypeError, match="at position 1"):
        c.contains(["bb", 3])  # type: ignore[list-item]
    assert c.contains(["dddd"]).tolist() == [False, True]


def test_spacy_when_asked() -> None:
    if importlib.util.find_spec("spacy") is None:
        with pytest.raises(ImportError, match="spaCy"):
            Corpus(["Some text."], tokenizer="spacy")
        return
    try:
        c = Corpus(["The cats were running. Dogs ran."], tokenizer="spacy")
    except ImportError:
        pytest.skip("spaCy is installed without its English model")
    assert c.docs[0][0] == ["cat", "run"]
