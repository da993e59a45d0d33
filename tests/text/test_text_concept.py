"""ConceptDirection on a synthetic corpus with a planted direction: concept vectors against a hand computation,
poles/snippets/clusters naming the planted words, scores, "auto" k, group comparisons (planted and null),
Holm, report formats, pickling and re-attachment, bad input."""

from __future__ import annotations

import doctest
import pickle
import warnings

import numpy as np
import pytest

import thrifty.text._concept
from thrifty.inference import GateWarning
from thrifty.text import ConceptDirection, ConceptFit, Corpus, Embeddings
from thrifty.text._concept import _holm

POS = ["friendly", "helpful", "warm"]
NEG = ["rude", "slow", "cold"]
FILL = [f"thing{i}" for i in range(60)]


def _planted(n_docs: int = 300, seed: int = 0) -> tuple[Embeddings, Corpus, np.ndarray]:
    rng = np.random.default_rng(seed)
    words = ["service", *POS, *NEG, *FILL, "table"]
    v = rng.normal(size=(len(words), 20))
    v[1:4, 0] += 5.0  # the planted direction e0: positive words at one end, negative at the other
    v[4:7, 0] -= 5.0
    emb = Embeddings(words, v)
    y = rng.normal(size=n_docs)
    texts = []
    for yi in y:
        side = POS if rng.random() < 1 / (1 + np.exp(-2.5 * yi)) else NEG
        f = rng.choice(FILL, size=3)
        texts.append(f"The service was {rng.choice(side)} and {f[0]} {f[1]}. The table was {f[2]}.")
    texts[0] += " Also: the service & <b>tags</b> were odd."
    return emb, Corpus(texts), y


@pytest.fixture(scope="module")
def planted() -> tuple[Embeddings, Corpus, np.ndarray, ConceptDirection, ConceptFit]:
    emb, corpus, y = _planted()
    cd = ConceptDirection(emb, corpus, y, ["service"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        fit = cd.fit(1, n_top=5, n_neighbors=10, n_clusters=2, random_state=0)
    return emb, corpus, y, cd, fit


def test_concept_vectors_match_a_hand_computation() -> None:
    rng = np.random.default_rng(5)
    words = ["seed", "a", "b", "c", "far"]
    v = rng.normal(size=(5, 3))
    emb = Embeddings(words, v)
    corpus = Corpus([["a", "b", "seed", "c", "x", "y", "far"], ["b", "b", "c"], ["seed", "a"]], stop_words=None)
    cd = ConceptDirection(emb, corpus, [0.0, 1.0, 2.0], ["seed"], window=2, sif_a=0.1)
    counts = {"a": 2, "b": 3, "c": 2, "seed": 2, "x": 1, "y": 1, "far": 1}
    total = sum(counts.values())

    def w(t: str) -> float:
        return 0.1 / (0.1 + counts[t] / total)

    E = dict(zip(words, v))
    # doc 0: window +-2 around "seed" = a, b | c, x; x has no vector; "far" is outside the window
    ctx0 = ["a", "b", "c"]
    want0 = sum(w(t) * E[t] for t in ctx0) / sum(w(t) for t in ctx0)
    np.testing.assert_allclose(cd.concept_vectors[0], want0, atol=1e-12)
    np.testing.assert_allclose(cd.concept_vectors[2], E["a"], atol=1e-12)
    assert cd.kept.tolist() == [True, False, True] and cd.n_occurrences == 2
    np.testing.assert_array_equal(cd.concept_vectors[1], 0.0)


def test_poles_snippets_clusters_name_the_planted_words(planted) -> None:  # type: ignore[no-untyped-def]
    emb, corpus, y, cd, fit = planted
    assert fit.test.pvalue <= 1e-3
    assert {w for w, _ in fit.poles.pos[:3]} == set(POS)
    assert {w for w, _ in fit.poles.neg[:3]} == set(NEG)
    assert "service" not in {w for w, _ in fit.poles.pos}  # seeds are not their own poles
    for side, planted_words in (("pos", POS), ("neg", NEG)):  # the contexts also hold random filler words
        hits = [any(p in s.text for p in planted_words) for s in fit.snippets[side]]
        assert len(hits) == 5 and hits[0] and sum(hits) >= 4, fit.snippets[side]
    assert all(s.seed == "service" for s in fit.snippets["pos"])
    best_pos = max((c for c in fit.clusters if c.side == "pos"), key=lambda c: c.cosine_beta)
    assert set(POS) <= {w for w, _ in best_pos.words}
    assert all(any(p in s.text for p in POS) for s in best_pos.snippets)
    assert {c.side for c in fit.clusters} == {"pos", "neg"}
    assert np.corrcoef(fit.scores, y)[0, 1] > 0.4
    assert fit.scores.shape == (corpus.n_docs,) and np.isfinite(fit.scores).all()
    np.testing.assert_allclose(np.linalg.norm(fit.beta), 1.0)


def test_auto_applies_the_one_se_rule(planted) -> None:  # type: ignore[no-untyped-def]
    _, _, _, cd, _ = planted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        fit = cd.fit("auto", k_max=4, n_perm=200, random_state=1)
    curve = fit.k_curve
    assert curve is not None and curve.shape == (4, 2)
    best = int(np.argmax(curve[:, 0]))
    within = np.flatnonzero(curve[:, 0] >= curve[best, 0] - curve[best, 1])
    assert fit.n_components == within[0] + 1  # the smallest k within one se of the best mean z
    assert fit.test.n_components == fit.n_components


def test_report_formats(planted) -> None:  # type: ignore[no-untyped-def]
    *_, fit = planted
    text = fit.report()
    for part in ("Poles", "Clusters", "Snippets", "Varimax axes", "friendly", "p = "):
        assert part in text
    md = fit.report("markdown")
    assert md.startswith("## Concept direction") and "### Poles" in md
    html = fit.report("html", n_words=3)
    assert html.startswith("<div") and "<b>tags" not in html
    with pytest.raises(ValueError, match="format"):
        fit.report("pdf")  # type: ignore[arg-type]
    # sizes name their argument (before: n_words=-1 and documents(n=2.5) were taken as given)
    for bad, exc in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="n_words"):
            fit.report(n_words=bad)  # type: ignore[arg-type]
    for bad, exc in ((-1, ValueError), (2.5, TypeError), ("3", TypeError)):
        with pytest.raises(exc, match="n must"):
            fit.documents("pos", bad)  # type: ignore[arg-type]
    assert fit.documents("pos", 0) == [] and len(fit.documents("neg", np.int64(2))) == 2
    assert "ConceptFit(k=1" in repr(fit)


def test_pickle_detaches_and_reattaches(planted) -> None:  # type: ignore[no-untyped-def]
    emb, corpus, y, _, fit = planted
    back = pickle.loads(pickle.dumps(fit))
    assert back.corpus is None and back.embeddings is None
    assert back.report() == fit.report()
    np.testing.assert_array_equal(back.scores, fit.scores)
    with pytest.raises(ValueError, match="attach"):
        back.documents()
    back.attach(corpus, emb)
    assert back.documents("pos", 3) == fit.documents("pos", 3)
    top = back.documents("pos", 1)[0]
    assert top[1] == np.nanmax(fit.scores)
    other = _planted(seed=9)[1]
    with pytest.raises(ValueError, match="corpus"):
        pickle.loads(pickle.dumps(fit)).attach(other)
    with pytest.raises(ValueError, match="dimension"):
        pickle.loads(pickle.dumps(fit)).attach(corpus, Embeddings(["a"], [[1.0, 2.0]]))
    with pytest.raises(ValueError, match="side"):
        fit.documents("up")  # type: ignore[arg-type]


def test_holm_against_hand_values() -> None:
    np.testing.assert_allclose(_holm(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])
    np.testing.assert_allclose(_holm(np.array([0.5, 0.9])), [1.0, 1.0])


def test_group_comparison_finds_a_planted_difference(planted) -> None:  # type: ignore[no-untyped-def]
    _, _, y, cd, _ = planted
    groups = np.where(y > 0.5, "high", np.where(y < -0.5, "low", "mid"))
    res = cd.compare_groups(groups, n_perm=999, random_state=0)
    by = {c.groups: c for c in res.contrasts}
    hl = by[("high", "low")]
    assert hl.pvalue == 1 / 1000 and hl.pvalue_corrected <= 3 / 1000
    assert {w for w, _ in hl.poles.pos[:3]} == set(POS)  # group "high"'s side
    assert len(res.contrasts) == 3 and res.correction == "holm"
    raw = np.array([c.pvalue for c in res.contrasts])
    np.testing.assert_allclose([c.pvalue_corrected for c in res.contrasts], _holm(raw))
    again = cd.compare_groups(groups, n_perm=999, random_state=res.seed_)
    assert [c.pvalue for c in again.contrasts] == raw.tolist()


def test_group_comparison_null_calibration_two_sided(planted) -> None:  # type: ignore[no-untyped-def]
    _, corpus, _, cd, _ = planted
    rng = np.random.default_rng(3)
    reps, alpha, hits = 300, 0.1, 0
    for _ in range(reps):
        groups = rng.integers(2, size=corpus.n_docs)
        hits += cd.compare_groups(groups, n_perm=99, correction=None, random_state=int(rng.integers(2**31))).contrasts[0].pvalue <= alpha
    se = np.sqrt(alpha * (1 - alpha) / reps)
    assert abs(hits / reps - alpha) <= 3 * se, hits / reps


def test_inputs_are_not_modified() -> None:
    emb, corpus, y = _planted(n_docs=80)
    y0, docs0 = y.copy(), [list(map(list, d)) for d in corpus.docs]
    cd = ConceptDirection(emb, corpus, y, ["service"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        cd.fit(1, n_perm=50, random_state=0)
    np.testing.assert_array_equal(y, y0)
    assert corpus.docs == docs0


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"y": np.zeros(5)}, ValueError, "y"),
        ({"y": np.full(300, np.nan)}, ValueError, "y"),
        ({"y": np.ones(300)}, ValueError, "constant"),
        ({"lexicon": ["absent"]}, ValueError, "lexicon"),
        ({"lexicon": "service"}, TypeError, "lexicon"),
        ({"lexicon": []}, ValueError, "lexicon"),
        ({"lexicon": [3]}, TypeError, "lexicon"),
        ({"window": 0}, ValueError, "window"),
        ({"sif_a": 0.0}, ValueError, "sif_a"),
        ({"corpus": ["text"]}, TypeError, "corpus"),
        ({"embeddings": np.zeros((3, 3))}, TypeError, "embeddings"),
    ],
)
def test_bad_construction(kwargs: dict[str, object], exc: type[Exception], match: str) -> None:
    emb, corpus, y = _planted()
    args: dict[str, object] = {"embeddings": emb, "corpus": corpus, "y": y, "lexicon": ["service"]}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        ConceptDirection(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"n_components": 0}, ValueError, "n_components"),
        ({"n_components": "best"}, ValueError, "n_components"),
        ({"n_components": 400}, ValueError, "n_components"),
        ({"k_max": 0, "n_components": "auto"}, ValueError, "k_max"),
        ({"n_top": 0}, ValueError, "n_top"),
        ({"n_clusters": 0}, ValueError, "n_clusters"),
        ({"vocabulary": "web"}, ValueError, "vocabulary"),
        ({"method": "jackknife"}, ValueError, "method"),
        ({"random_state": -1}, ValueError, "random_state"),
    ],
)
def test_bad_fit_arguments(planted, kwargs: dict[str, object], exc: type[Exception], match: str) -> None:  # type: ignore[no-untyped-def]
    cd = planted[3]
    with pytest.raises(exc, match=match):
        cd.fit(**kwargs)


def test_bad_group_arguments(planted) -> None:  # type: ignore[no-untyped-def]
    cd = planted[3]
    n = cd.corpus.n_docs
    with pytest.raises(ValueError, match="groups"):
        cd.compare_groups([0] * (n - 1))
    with pytest.raises(ValueError, match="groups"):
        cd.compare_groups([0] * n)
    with pytest.raises(ValueError, match="correction"):
        cd.compare_groups([0, 1] * (n // 2), correction="bonferroni")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_perm"):
        cd.compare_groups([0, 1] * (n // 2), n_perm=0)


def test_docstring_example() -> None:
    result = doctest.testmod(thrifty.text._concept, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
