"""Embeddings: every file format round-trips (written here independently), normalisation, neighbours, encoders."""

from __future__ import annotations

import doctest
import gzip
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import thrifty.text._corpus
import thrifty.text._embeddings
import thrifty.text._lexicon
from thrifty.text import Embeddings

WORDS = ["alpha", "beta", "gamma", "delta", "épsilon"]


def _vectors() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)


def _write_text(path: Path, header: bool, gz: bool = False) -> None:
    lines = [f"{len(WORDS)} 4"] if header else []
    lines += [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(WORDS, _vectors())]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    (gzip.open(path, "wb") if gz else open(path, "wb")).write(data)


def _write_bin(path: Path, newline_before_word: bool) -> None:
    out = bytearray(f"{len(WORDS)} 4\n".encode())
    for w, row in zip(WORDS, _vectors()):
        out += (b"\n" if newline_before_word and out[-1:] != b"\n" else b"") + w.encode() + b" "
        out += struct.pack("<4f", *row)
    path.write_bytes(bytes(out))


@pytest.mark.parametrize("name,header,gz", [("e.txt", False, False), ("e.vec", True, False), ("e.txt.gz", True, True)])
def test_text_formats_round_trip(tmp_path: Path, name: str, header: bool, gz: bool) -> None:
    p = tmp_path / name
    _write_text(p, header, gz)
    emb = Embeddings.load(p)
    assert emb.words == tuple(WORDS)
    np.testing.assert_array_equal(emb.vectors, _vectors())


@pytest.mark.parametrize("newline", [False, True])
def test_word2vec_binary_round_trips(tmp_path: Path, newline: bool) -> None:
    p = tmp_path / "e.bin"
    _write_bin(p, newline)
    emb = Embeddings.load(p)
    assert emb.words == tuple(WORDS)
    np.testing.assert_array_equal(emb.vectors, _vectors())


def test_npy_with_vocabulary_beside_or_given(tmp_path: Path) -> None:
    np.save(tmp_path / "e.npy", _vectors())
    (tmp_path / "e.vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    assert Embeddings.load(tmp_path / "e.npy").words == tuple(WORDS)
    (tmp_path / "words.txt").write_text("\n".join(WORDS), encoding="utf-8")
    with gzip.open(tmp_path / "f.npy.gz", "wb") as f:
        np.save(f, _vectors())
    emb = Embeddings.load(tmp_path / "f.npy.gz", vocab=tmp_path / "words.txt")
    np.testing.assert_array_equal(emb.vectors, _vectors())


def test_gensim_kv_when_installed(tmp_path: Path) -> None:
    gensim_models = pytest.importorskip("gensim.models")
    kv = gensim_models.KeyedVectors(4)
    kv.add_vectors(WORDS, _vectors())
    kv.save(str(tmp_path / "e.kv"))
    emb = Embeddings.load(tmp_path / "e.kv")
    assert emb.words == tuple(WORDS)


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("ragged.txt", "a 1 2\nb 1\n", "line 2 has 1 values"),
        ("nonnum.txt", "a 1 x\n", "non-numeric"),
        ("empty.vec", "", "no vectors"),
        ("e.bin", "3 4\nab ", "ends inside"),
        ("e.bin", "nothing\n", "header"),
        ("e.csv", "a,1\n", "unknown embeddings format"),
        ("nan.txt", "a nan 1\n", "NaN"),
        ("dup.txt", "a 1 2\na 3 4\n", "more than once"),
    ],
)
def test_malformed_files_raise_value_errors(tmp_path: Path, name: str, content: str, match: str) -> None:
    p = tmp_path / name
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        Embeddings.load(p)


def test_missing_file_and_vocabulary(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="path"):
        Embeddings.load(tmp_path / "none.txt")
    np.save(tmp_path / "lonely.npy", _vectors())
    with pytest.raises(ValueError, match="vocab"):
        Embeddings.load(tmp_path / "lonely.npy")


def test_constructor_validates_and_copies() -> None:
    v = _vectors()
    emb = Embeddings(WORDS, v)
    v[0, 0] = 99.0
    assert emb.vectors[0, 0] != 99.0 and not emb.vectors.flags.writeable
    with pytest.raises(ValueError, match="rows"):
        Embeddings(WORDS[:3], _vectors())
    with pytest.raises(TypeError, match="words"):
        Embeddings([1, 2, 3, 4, 5], _vectors())  # type: ignore[list-item]
    with pytest.raises(TypeError, match="words"):
        Embeddings("alpha", _vectors()[:1])
    with pytest.raises(ValueError, match="empty"):
        Embeddings(["", "a", "b", "c", "d"], _vectors())
    with pytest.raises(TypeError, match="vectors"):
        Embeddings(WORDS, np.array([["x"] * 4] * 5))
    with pytest.raises(KeyError, match="zeta"):
        emb["zeta"]


def test_normalize_l2_and_all_but_the_top() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=(200, 10)) + 5.0 * rng.normal(size=(1, 10))  # a shared mean, as real embeddings have
    v[:, 0] *= 20  # one dominant direction
    emb = Embeddings([f"w{i}" for i in range(200)], v)
    unit = emb.normalize(l2=True, abtt=0)
    np.testing.assert_allclose(np.linalg.norm(unit.vectors, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(unit.vectors, v / np.linalg.norm(v, axis=1, keepdims=True), atol=1e-12)
    ab = emb.normalize(l2=False, abtt=2)
    c = v - v.mean(axis=0)
    top = np.linalg.svd(c, full_matrices=False)[2][:2]
    np.testing.assert_allclose(ab.vectors @ top.T, 0.0, atol=1e-9)  # the top two directions are gone
    np.testing.assert_allclose(ab.vectors, c - c @ top.T @ top, atol=1e-9)
    assert emb.normalize(abtt=0, l2=False).vectors.dtype == np.float64
    with pytest.raises(ValueError, match="abtt"):
        emb.normalize(abtt=10)
    with pytest.raises(ValueError, match="abtt"):
        emb.normalize(abtt=-1)
    with pytest.raises(TypeError, match="l2"):
        emb.normalize(l2="yes")  # type: ignore[arg-type]


def test_neighbours_match_brute_force() -> None:
    rng = np.random.default_rng(2)
    v = rng.normal(size=(300, 8))
    words = [f"w{i}" for i in range(300)]
    emb = Embeddings(words, v)
    q = rng.normal(size=8)
    cos = (v / np.linalg.norm(v, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    want = np.argsort(-cos)[:7]
    got = emb.similar_by_vector(q, topn=7)
    assert [w for w, _ in got] == [words[i] for i in want]
    np.testing.assert_allclose([s for _, s in got], cos[want], atol=1e-12)
    nn = emb.most_similar("w5", topn=4)
    assert "w5" not in [w for w, _ in nn] and len(nn) == 4
    assert len(emb.similar_by_vector(q, topn=1000)) == 300
    assert Embeddings(["a"], [[1.0, 0.0]]).similar_by_vector(np.ones(2), exclude=["a"]) == []
    with pytest.raises(ValueError, match="non-zero"):
        emb.similar_by_vector(np.zeros(8))
    with pytest.raises(ValueError, match="shape"):
        emb.similar_by_vector(np.ones(3))
    with pytest.raises(ValueError, match="topn"):
        emb.similar_by_vector(q, topn=0)


def test_from_encoder_with_an_encode_object_and_bad_models() -> None:
    class Encoder:
        def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
            return np.array([[len(t), t.count("a")] for t in texts], dtype=float)

    emb = Embeddings.from_encoder(Encoder(), ["a", "banana"])
    np.testing.assert_array_equal(emb.vectors, [[1, 1], [6, 3]])
    with pytest.raises(TypeError, match="model"):
        Embeddings.from_encoder(42, ["a"])
    with pytest.raises(ValueError, match="words"):
        Embeddings.from_encoder(Encoder(), [])
    with pytest.raises(ValueError, match="batch_size"):
        Embeddings.from_encoder(Encoder(), ["a"], batch_size=0)


def test_from_encoder_mean_pools_a_transformers_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "##ness", "day"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = transformers.BertTokenizer(str(tmp_path / "vocab.txt"))
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=16, max_position_embeddings=32)
    net = transformers.BertModel(cfg).eval()
    words = ["good", "badness", "day"]
    emb = Embeddings.from_encoder((tok, net), words, batch_size=2)
    for i, w in enumerate(words):  # one word at a time, no padding: the plain mean of its hidden states
        enc = tok([w], return_tensors="pt")
        with torch.no_grad():
            h = net(**enc).last_hidden_state[0]
        np.testing.assert_allclose(emb.vectors[i], h.mean(dim=0).numpy(), atol=1e-5)
    net.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    again = Embeddings.from_encoder(tmp_path / "m", words)
    np.testing.assert_allclose(again.vectors, emb.vectors, atol=1e-5)
    with pytest.raises(ValueError, match="model"):
        Embeddings.from_encoder(tmp_path / "nowhere", words)


@pytest.mark.parametrize("module", [thrifty.text._embeddings, thrifty.text._corpus, thrifty.text._lexicon])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("scale", [2.0**1000, 2.0**-1000])
def test_vectors_at_extreme_scales_give_the_unit_scale_answers(scale: float) -> None:
    # Found by a probe: at 1e300 and 1e-310 most_similar and lexicon_test raised "vector must be
    # finite and non-zero" (squared norms left the float range) and normalize() returned zeros.
    # Cosines, the normalised vectors and the test are scale-free: the same as at unit scale.
    from thrifty.text import lexicon_test

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 16))
    words = [f"w{i}" for i in range(200)]
    unit, big = Embeddings(words, vectors), Embeddings(words, vectors * scale)
    near, near_big = unit.most_similar("w3", 5), big.most_similar("w3", 5)
    assert [w for w, _ in near_big] == [w for w, _ in near]
    np.testing.assert_allclose([c for _, c in near_big], [c for _, c in near], rtol=1e-14)
    for abtt in (0, 1):
        np.testing.assert_allclose(big.normalize(abtt=abtt).vectors, unit.normalize(abtt=abtt).vectors, atol=1e-14)
    np.testing.assert_allclose(big.normalize(l2=False).vectors, unit.normalize(l2=False).vectors * scale, rtol=1e-12)
    values = vectors[:, 0] + 0.5 * rng.standard_normal(200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r0 = lexicon_test(unit, words, values, 2, random_state=0)
        r = lexicon_test(big, words, values * scale, 2, random_state=0)
    assert r.test.statistic == pytest.approx(r0.test.statistic, rel=1e-12)
    assert [w for w, _ in r.poles.pos] == [w for w, _ in r0.poles.pos]


def test_word_lists_and_query_vectors_are_checked() -> None:
    # Found by a probe: lookup("w1") and subset("w1") iterated the characters ("w", "1": nothing
    # found, then "vectors must have at least 1 row"), and similar_by_vector took "abc" to a float
    # conversion error and a complex vector to "must be finite and non-zero"
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20)]
    emb = Embeddings(words, rng.standard_normal((20, 4)))
    for call in (emb.lookup, emb.subset):
        with pytest.raises(TypeError, match=r"words must be an iterable of str, got str \(one word: \['w1'\]\)"):
            call("w1")
        with pytest.raises(TypeError, match="at position 1"):
            call(["w1", 2])
    assert emb.lookup(["w3", "zz", "w1"]) == ([3, 1], ["zz"])
    assert list(emb.subset(("w5",)).words) == ["w5"]
    for bad in ("abc", np.ones(4) * 1j, np.array([object()] * 4)):
        with pytest.raises(TypeError, match="vector must hold real numbers"):
            emb.similar_by_vector(bad)
    with pytest.raises(TypeError, match="exclude"):
        emb.similar_by_vector(np.ones(4), exclude="w1")
    got = emb.similar_by_vector(np.arange(4), 3)  # integer vectors are real numbers
    assert got == emb.similar_by_vector(np.arange(4.0), 3)
