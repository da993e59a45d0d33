"""lexicon_test: the same test as subspace_test on the words' rows, a planted direction named by its poles,
calibration under the null, bad input; and the VADER/MiniLM replication on a subset when the wheels are there."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from thrifty.inference import GateWarning, subspace_test
from thrifty.text import Embeddings, lexicon_test


def _planted(n: int = 400, d: int = 24, seed: int = 0) -> tuple[Embeddings, list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, d))
    words = [f"w{i}" for i in range(n)]
    # the planted valence axis e0; the named words sit at its two ends
    words[0], words[1], words[2] = "joy", "love", "delight"
    words[3], words[4], words[5] = "grief", "hate", "dread"
    v[:3, 0] = 6.0
    v[3:6, 0] = -6.0
    values = v[:, 0] + 0.5 * rng.normal(size=n)
    return Embeddings(words, v), words, values


def test_same_test_as_subspace_test_on_the_rows() -> None:
    emb, words, values = _planted()
    res = lexicon_test(emb, words, values, n_components=1, random_state=3)
    ref = subspace_test(np.asarray(emb.vectors), values, 1, random_state=3)
    assert res.test.pvalue == ref.pvalue and res.test.statistic == ref.statistic
    assert res.words == tuple(words) and res.missing == ()


def test_planted_direction_poles_and_axes_name_the_planted_words() -> None:
    emb, words, values = _planted()
    res = lexicon_test(emb, words, values, n_components=2, n_top=3, random_state=0)
    assert res.test.pvalue <= 1e-3 and res.test.r2 > 0.8
    assert {w for w, _ in res.poles.pos} == {"joy", "love", "delight"}
    assert {w for w, _ in res.poles.neg} == {"grief", "hate", "dread"}
    assert abs(res.beta[0]) > 0.95 and res.beta[0] > 0
    assert len(res.axes) == 2
    best = max(res.axes, key=lambda a: a.r_outcome)
    assert {w for w, _ in best.poles.pos} == {"joy", "love", "delight"}
    np.testing.assert_allclose([np.linalg.norm(a.vector) for a in res.axes], 1.0)
    assert "joy" in repr(res)


def test_mapping_duplicates_and_missing_words() -> None:
    emb, words, values = _planted()
    lex = dict(zip(words, values))
    a = lexicon_test(emb, lex, n_components=1, random_state=1)
    b = lexicon_test(emb, words, values, n_components=1, random_state=1)
    assert a.test.pvalue == b.test.pvalue
    # a word listed twice gets its mean value; unknown words are reported, not fatal
    dup_words = [*words, "joy", "unknownword"]
    dup_values = np.r_[values, values[0] + 2.0, 0.0]
    c = lexicon_test(emb, dup_words, dup_values, n_components=1, random_state=1)
    assert c.missing == ("unknownword",)
    vals2 = values.copy()
    vals2[0] = np.mean([values[0], values[0] + 2.0])
    ref = subspace_test(np.asarray(emb.vectors), vals2, 1, random_state=1)
    assert c.test.pvalue == ref.pvalue


def test_inputs_are_not_modified() -> None:
    emb, words, values = _planted()
    before_v, before_w = values.copy(), list(words)
    lexicon_test(emb, words, values, n_components=1, random_state=0)
    np.testing.assert_array_equal(values, before_v)
    assert words == before_w


def test_null_calibration_two_sided() -> None:
    # values independent of the vectors: P(p <= alpha) within alpha +- 3 se over 400 replicates (NB, k = 1)
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(120)]
    hits, reps, alpha = 0, 400, 0.1
    for _ in range(reps):
        emb = Embeddings(words, rng.normal(size=(120, 15)))
        p = lexicon_test(emb, words, rng.normal(size=120), n_components=1, n_splits=20,
                         random_state=int(rng.integers(2**31))).test.pvalue
        hits += p <= alpha
    se = np.sqrt(alpha * (1 - alpha) / reps)
    assert abs(hits / reps - alpha) <= 3 * se, hits / reps


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"values": [np.nan] * 400}, ValueError, "values"),
        ({"values": [1.0] * 10}, ValueError, "values"),
        ({"values": np.ones(400)}, ValueError, "constant"),
        ({"n_components": 0}, ValueError, "n_components"),
        ({"n_components": 30}, ValueError, "n_components"),
        ({"n_components": 1.5}, TypeError, "n_components"),
        ({"n_top": 0}, ValueError, "n_top"),
        ({"method": "cv-permutation-q2"}, ValueError, "method"),
        ({"embeddings": "glove"}, TypeError, "embeddings"),
        ({"words": "joy"}, TypeError, "words"),
        ({"words": [f"x{i}" for i in range(400)]}, ValueError, "words"),
        ({"values": None}, ValueError, "values"),
    ],
)
def test_bad_input(kwargs: dict[str, object], exc: type[Exception], match: str) -> None:
    emb, words, values = _planted()
    args: dict[str, object] = {"embeddings": emb, "words": words, "values": values, "n_components": 1}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        lexicon_test(**args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="values must be None"):
        lexicon_test(emb, dict(zip(words, values)), values)


@pytest.mark.slow
def test_vader_valence_from_minilm_subset() -> None:
    # the paper's word-level run on every 6th VADER word (1,202 words; the full run is benches/text_vader.py)
    pytest.importorskip("transformers")
    from thrifty.text.datasets import minilm_dir, vader_lexicon

    try:
        words, valence = vader_lexicon()
        model = minilm_dir()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    words, valence = words[::6], valence[::6]
    emb = Embeddings.from_encoder(model, words)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        res = lexicon_test(emb, words, valence, n_components=3, n_perm=200, random_state=0)
    assert res.test.pvalue <= 1 / 201 and res.test.r2 > 0.45, res.test
    pos, neg = {w for w, _ in res.poles.pos}, {w for w, _ in res.poles.neg}
    vmap = dict(zip(words, valence))
    assert np.mean([vmap[w] for w in pos]) > 1.0 > -1.0 > np.mean([vmap[w] for w in neg])
