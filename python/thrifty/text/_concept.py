"""ConceptDirection: the direction of a concept's contexts, across documents, that goes with an outcome.

1. **Concept vectors.** For every occurrence of a seed (lexicon) word, the context is the ``window`` tokens
   on each side within its sentence (stop words already removed by the :class:`Corpus`; seed words and words
   without a vector left out). A document's concept vector is the SIF-weighted mean of all its context
   tokens, weight ``a / (a + p(w))`` with ``p(w)`` the token's relative frequency in the corpus (Arora et al.
   2017). Documents without any context token are dropped (``kept``).
2. **Fit.** :func:`thrifty.inference.subspace_test` of the outcome on the concept vectors (PLS, k
   components; ``"auto"``: k by the one-standard-error rule on the NB statistic over 1..k_max), then the
   full-data PLS fit: ``beta`` is the unit coefficient direction in embedding coordinates.
3. **Reading it.** Poles (nearest words of ``+beta``/``-beta``), k-means clusters of the pole neighbours,
   snippets (the sentences whose seed contexts align best with each pole and cluster), per-document scores
   (cosine of the concept vector with ``beta``), varimax axes and a report.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from thrifty._validation import RandomState, check_finite_vector, check_float, check_int, seed_from_random_state
from thrifty.text._corpus import Corpus
from thrifty.text._direction import axes_of, fit_direction, poles_of, select_k_one_se
from thrifty.text._embeddings import Embeddings, unit_rows
from thrifty.text._fit import ConceptFit
from thrifty.text._results import Cluster, Contrast, FloatArray, GroupComparison, Snippet


@dataclass(frozen=True)
class _Contexts:
    """Per-occurrence context vectors and the document vectors built from them."""

    occ_doc: npt.NDArray[np.int64]  # (n_occ,)
    occ_sentence: npt.NDArray[np.int64]
    occ_seed: tuple[str, ...]
    occ_vectors: FloatArray  # (n_occ, dim) SIF-weighted means (rows with no context are absent)
    doc_vectors: FloatArray  # (n_docs, dim), zero rows for dropped documents
    kept: npt.NDArray[np.bool_]


def _sif_contexts(emb: Embeddings, corpus: Corpus, seeds: frozenset[str], window: int, a: float) -> _Contexts:
    counts = corpus.counts()
    total = sum(counts.values())
    occ_doc, occ_sent, occ_seed, data, cols, indptr = [], [], [], [], [], [0]
    for i, doc in enumerate(corpus.docs):
        for j, sent in enumerate(doc):
            for t, tok in enumerate(sent):
                if tok not in seeds:
                    continue
                ctx = sent[max(0, t - window) : t] + sent[t + 1 : t + 1 + window]
                rows, _ = emb.lookup(w for w in ctx if w not in seeds)
                if not rows:
                    continue
                for w, r in zip((w for w in ctx if w not in seeds and w in emb), rows):
                    data.append(a / (a + counts[w] / total))
                    cols.append(r)
                indptr.append(len(cols))
                occ_doc.append(i)
                occ_sent.append(j)
                occ_seed.append(tok)
    weights = sp.csr_matrix((np.asarray(data, dtype=np.float64), np.asarray(cols, dtype=np.int64), np.asarray(indptr)),
                            shape=(len(occ_doc), len(emb)))
    vec = np.asarray(emb.vectors, dtype=np.float64)
    sums = np.asarray(weights @ vec)
    wsum = np.asarray(weights.sum(axis=1)).ravel()
    occ_vectors = sums / wsum[:, None] if len(occ_doc) else np.zeros((0, emb.dim))
    docs = np.asarray(occ_doc, dtype=np.int64)
    doc_sums = np.zeros((corpus.n_docs, emb.dim))
    np.add.at(doc_sums, docs, sums)
    doc_w = np.bincount(docs, weights=wsum, minlength=corpus.n_docs)
    kept = doc_w > 0
    doc_vectors = np.zeros_like(doc_sums)
    doc_vectors[kept] = doc_sums[kept] / doc_w[kept, None]
    return _Contexts(docs, np.asarray(occ_sent, dtype=np.int64), tuple(occ_seed), occ_vectors, doc_vectors, kept)


def _holm(p: FloatArray) -> FloatArray:
    """Holm's step-down adjusted p-values (monotone, capped at 1)."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


class ConceptDirection:
    """Supervised semantic direction of a concept's contexts (per-document concept vectors + a PLS test).

    Parameters
    ----------
    embeddings : Embeddings
        Word vectors (normalise them first if wanted: ``embeddings.normalize()``).
    corpus : Corpus
    y : array-like of shape (n_docs,)
        The outcome of every document (finite, not constant over the kept documents).
    lexicon : iterable of str
        Seed words of the concept (at least one must occur in the corpus with context).
    window : int, default=3
        Context tokens on each side of a seed occurrence.
    sif_a : float, default=1e-3
        SIF smoothing ``a`` of the weight ``a / (a + p(w))``.

    Attributes
    ----------
    concept_vectors : ndarray of shape (n_docs, dim)
        Zero rows for dropped documents.
    kept : ndarray of bool, shape (n_docs,)
        Documents with at least one context token.
    n_occurrences : int
        Seed occurrences with context.

    Raises
    ------
    TypeError
        Wrong types for ``embeddings``/``corpus``/``lexicon``.
    ValueError
        ``y`` of the wrong length, NaN/inf or constant over the kept documents; no seed word with context;
        ``window < 1``; ``sif_a <= 0``. (Too few kept documents for the test is an error of ``fit``.)

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.text import Corpus, ConceptDirection, Embeddings
    >>> rng = np.random.default_rng(0)
    >>> moods, fillers = ["friendly", "kind", "rude", "cold"], [f"thing{i}" for i in range(30)]
    >>> words = ["service"] + moods + fillers
    >>> vecs = rng.normal(size=(len(words), 16))
    >>> vecs[5:] *= 0.3; vecs[1:3, 0] += 4; vecs[3:5, 0] -= 4  # the planted valence axis
    >>> emb = Embeddings(words, vecs)
    >>> docs, y = [], []
    >>> for i in range(200):
    ...     good = i % 2 == 0
    ...     mood = moods[rng.integers(2) + (0 if good else 2)]
    ...     docs.append(f"The service was {mood} and {fillers[rng.integers(30)]}.")
    ...     y.append(float(good) + 0.3 * rng.normal())
    >>> fit = ConceptDirection(emb, Corpus(docs), y, ["service"]).fit(1, random_state=0)
    >>> bool(fit.test.pvalue < 0.001), sorted(w for w, _ in fit.poles.pos[:2]), sorted(w for w, _ in fit.poles.neg[:2])
    (True, ['friendly', 'kind'], ['cold', 'rude'])
    """

    def __init__(
        self,
        embeddings: Embeddings,
        corpus: Corpus,
        y: npt.ArrayLike,
        lexicon: Iterable[str],
        window: int = 3,
        sif_a: float = 1e-3,
    ) -> None:
        if not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be an Embeddings, got {type(embeddings).__name__}")
        if not isinstance(corpus, Corpus):
            raise TypeError(f"corpus must be a Corpus, got {type(corpus).__name__}")
        if isinstance(lexicon, (str, bytes)) or not isinstance(lexicon, Iterable):
            raise TypeError(f"lexicon must be an iterable of str, got {type(lexicon).__name__}")
        seeds = tuple(dict.fromkeys(lexicon))
        if not seeds or not all(isinstance(w, str) for w in seeds):
            raise (TypeError if seeds else ValueError)("lexicon must hold at least one str (and str only)")
        self.embeddings = embeddings
        self.corpus = corpus
        self.y = check_finite_vector(np.array(y, copy=True), "y", corpus.n_docs)
        self.lexicon = seeds
        self.window = check_int(window, "window", 1)
        self.sif_a = check_float(sif_a, "sif_a", 0.0, math.inf)
        self._ctx = _sif_contexts(embeddings, corpus, frozenset(seeds), self.window, self.sif_a)
        if not len(self._ctx.occ_doc):
            raise ValueError("lexicon: no seed word occurs in the corpus with a context word that has a vector")
        self._center = self._ctx.doc_vectors[self._ctx.kept].mean(axis=0)
        if np.ptp(self.y[self._ctx.kept]) == 0.0:
            raise ValueError("y is constant over the documents that hold a seed word; there is nothing to predict")

    @property
    def concept_vectors(self) -> FloatArray:
        """Per-document concept vectors, shape (n_docs, dim) (zero rows where dropped)."""
        return self._ctx.doc_vectors

    @property
    def kept(self) -> npt.NDArray[np.bool_]:
        """Documents with a concept vector."""
        return self._ctx.kept

    @property
    def n_occurrences(self) -> int:
        """Seed occurrences with at least one context word."""
        return len(self._ctx.occ_doc)

    def fit(
        self,
        n_components: int | Literal["auto"] = 1,
        *,
        k_max: int = 5,
        method: str = "auto",
        n_splits: int = 50,
        n_perm: int = 1000,
        n_top: int = 20,
        n_neighbors: int = 30,
        n_clusters: int = 3,
        n_snippets: int = 5,
        vocabulary: Literal["corpus", "all"] = "corpus",
        min_count: int = 1,
        random_state: RandomState = None,
        n_jobs: int | None = None,
        progress: bool | None = None,
    ) -> ConceptFit:
        """Fit and test the direction; read its poles, clusters, snippets and per-document scores.

        Parameters
        ----------
        n_components : int or "auto", default=1
            PLS components k. ``"auto"``: the smallest k in 1..k_max whose NB mean Fisher z is within one
            standard error of the best (the final test then runs on the same data, so its p-value is
            optimistic by that choice; fix k in advance for a confirmatory p).
        k_max : int, default=5
        method, n_splits, n_perm, random_state, n_jobs, progress
            As in :func:`thrifty.inference.subspace_test` (a split test).
        n_top : int, default=20
            Words per pole.
        n_neighbors : int, default=30
            Pole neighbours clustered on each side.
        n_clusters : int, default=3
            k-means clusters per side (:class:`thrifty.cluster.HartiganKMeans`).
        n_snippets : int, default=5
            Sentences per pole and per cluster.
        vocabulary : {"corpus", "all"}, default="corpus"
            Pole words among the corpus tokens that have vectors (seeds left out), or the whole embedding
            vocabulary. Cosines (poles, clusters, snippets, scores) are between vectors centred at the mean
            of the candidate words (poles, clusters) or of the kept concept vectors (snippets, scores).
        min_count : int, default=1
            With ``vocabulary="corpus"``: pole words seen at least this often in the corpus.

        Returns
        -------
        ConceptFit

        Raises
        ------
        ValueError, TypeError
            Out-of-range or wrongly typed parameters (named), or a test that cannot run (too few documents).
        """
        seed = seed_from_random_state(random_state)
        topn = check_int(n_top, "n_top", 1)
        nn = check_int(n_neighbors, "n_neighbors", 1)
        nc = check_int(n_clusters, "n_clusters", 1)
        ns = check_int(n_snippets, "n_snippets", 0)
        if vocabulary not in ("corpus", "all"):
            raise ValueError(f"vocabulary must be 'corpus' or 'all', got {vocabulary!r}")
        x = np.ascontiguousarray(self._ctx.doc_vectors[self._ctx.kept])
        yk = self.y[self._ctx.kept]
        opts = {"method": method, "n_splits": n_splits, "n_perm": n_perm, "random_state": seed,
                "n_jobs": n_jobs, "progress": progress}
        k, curve = self._choose_k(x, yk, n_components, k_max, opts)
        d = fit_direction(x, yk, k, opts)
        cands = self._candidates(vocabulary, check_int(min_count, "min_count", 1))
        scores = np.full(self.corpus.n_docs, np.nan)
        scores[self._ctx.kept] = unit_rows(x - x.mean(axis=0)) @ d.beta
        clusters = self._clusters(cands, d.beta, nn, nc, ns, seed)
        return ConceptFit(
            test=d.test, beta=d.beta, n_components=k, k_curve=curve,
            poles=poles_of(cands, d.beta, topn), axes=axes_of(cands, d, topn),
            clusters=clusters, snippets={"pos": self._snippets(d.beta, ns), "neg": self._snippets(-d.beta, ns)},
            scores=scores, kept=self._ctx.kept.copy(), y=self.y.copy(), lexicon=self.lexicon,
            window=self.window, sif_a=self.sif_a, corpus_fingerprint=self.corpus.fingerprint(),
            corpus=self.corpus, embeddings=self.embeddings,
        )

    # ---- steps -------------------------------------------------------------------------------------
    @staticmethod
    def _choose_k(
        x: FloatArray, y: FloatArray, n_components: Any, k_max: Any, opts: dict[str, Any]
    ) -> tuple[int, FloatArray | None]:
        limit = min(x.shape[1], x.shape[0] - 5)
        if isinstance(n_components, str):
            if n_components != "auto":
                raise ValueError(f"n_components must be an int or 'auto', got {n_components!r}")
            km = min(check_int(k_max, "k_max", 1), limit)
            return select_k_one_se(x, y, km, opts)
        k = check_int(n_components, "n_components", 1)
        if k > limit:
            raise ValueError(f"n_components must be <= min(dim, n_kept_docs - 5) = {limit}, got {k}")
        return k, None

    def _candidates(self, vocabulary: str, min_count: int = 1) -> Embeddings:
        """The pole words (centred at their mean, so cosines are not dominated by the shared component)."""
        if vocabulary == "all":
            return self.embeddings.centered()
        seeds = set(self.lexicon)
        words = [w for w in self.corpus.vocabulary(min_count) if w in self.embeddings and w not in seeds]
        if not words:
            raise ValueError(f"vocabulary='corpus': no corpus word seen >= {min_count} times has a vector")
        return self.embeddings.subset(words).centered()

    def _snippets(self, direction: FloatArray, n: int) -> tuple[Snippet, ...]:
        if n == 0:
            return ()
        ctx = self._ctx
        cos = unit_rows(ctx.occ_vectors - self._center) @ unit_rows(direction)
        out: list[Snippet] = []
        seen: set[str] = set()
        for o in np.argsort(-cos, kind="stable"):
            key = (int(ctx.occ_doc[o]), int(ctx.occ_sentence[o]))
            text = self.corpus.sentences[key[0]][key[1]]
            if text in seen:  # one sentence (or a repeated text) once
                continue
            seen.add(text)
            out.append(Snippet(doc=key[0], sentence=key[1], seed=ctx.occ_seed[o], text=text, cosine=float(cos[o])))
            if len(out) == n:
                break
        return tuple(out)

    def _clusters(self, cands: Embeddings, beta: FloatArray, nn: int, nc: int, ns: int, seed: int) -> tuple[Cluster, ...]:
        from thrifty.cluster import HartiganKMeans

        out: list[Cluster] = []
        for side, direction in (("pos", beta), ("neg", -beta)):
            near = cands.similar_by_vector(direction, nn)
            words = [w for w, _ in near]
            vecs = unit_rows(np.asarray(cands.subset(words).vectors, dtype=np.float64))
            k = min(nc, len({v.tobytes() for v in vecs}))
            labels = (
                HartiganKMeans(n_clusters=k, random_state=seed % (2**32)).fit(vecs).labels_ if k > 1 else np.zeros(len(words), int)
            )
            for c in range(k):
                members = np.flatnonzero(labels == c)
                centroid = unit_rows(vecs[members].mean(axis=0))
                sims = vecs[members] @ centroid
                order = np.argsort(-sims, kind="stable")
                out.append(Cluster(
                    side=side, words=tuple((words[members[i]], float(sims[i])) for i in order), centroid=centroid,
                    cosine_beta=float(centroid @ unit_rows(direction)), snippets=self._snippets(centroid, ns),
                ))
        out.sort(key=lambda c: (c.side != "pos", -c.cosine_beta))
        return tuple(out)

    # ---- groups --------------------------------------------------------------------------------------
    def compare_groups(
        self,
        groups: Sequence[Hashable] | npt.NDArray[Any],
        *,
        n_perm: int = 5000,
        correction: Literal["holm"] | None = "holm",
        n_top: int = 10,
        random_state: RandomState = None,
    ) -> GroupComparison:
        """Pairwise permutation tests of group differences in the concept vectors (Holm-corrected).

        For every pair of groups (a, b) the statistic is ``T = ||mean_a - mean_b||`` of the unit concept
        vectors of their kept documents; the group labels are shuffled within the pair ``n_perm`` times
        and ``p = (1 + #{T* >= T}) / (n_perm + 1)``. The contrast's direction ``mean_a - mean_b`` is read
        through its poles.

        Parameters
        ----------
        groups : sequence of hashable labels of length n_docs
            At least two groups with >= 2 kept documents each (smaller groups are left out).
        n_perm : int, default=5000
        correction : {"holm", None}, default="holm"
        n_top : int, default=10
            Words per pole of each contrast.
        random_state : None, int or numpy Generator

        Returns
        -------
        GroupComparison
            ``contrasts`` (one :class:`Contrast` per pair) and ``seed_``.

        Raises
        ------
        ValueError
            Wrong length, fewer than two usable groups, ``n_perm < 1``, unknown ``correction``.
        """
        labels: list[Any] = groups.tolist() if isinstance(groups, np.ndarray) else list(groups)
        if len(labels) != self.corpus.n_docs:
            raise ValueError(f"groups has length {len(labels)}, expected n_docs = {self.corpus.n_docs}")
        if correction not in ("holm", None):
            raise ValueError(f"correction must be 'holm' or None, got {correction!r}")
        B = check_int(n_perm, "n_perm", 1)
        topn = check_int(n_top, "n_top", 1)
        seed = seed_from_random_state(random_state)
        u = unit_rows(self._ctx.doc_vectors)
        members: dict[Any, npt.NDArray[np.int64]] = {}
        for g in sorted(set(labels), key=repr):
            idx = np.flatnonzero(np.array([lab == g for lab in labels]) & self._ctx.kept)
            if len(idx) >= 2:
                members[g] = idx
        if len(members) < 2:
            raise ValueError("groups: need at least two groups with >= 2 documents holding a seed word")
        rng = np.random.default_rng(seed)
        pairs = list(itertools.combinations(members, 2))
        raw = [self._contrast(u, members[a], members[b], B, rng) for a, b in pairs]
        p = np.array([r[1] for r in raw])
        adj = _holm(p) if correction == "holm" else p
        cands = self._candidates("corpus")
        contrasts = tuple(
            Contrast(groups=(a, b), n=(len(members[a]), len(members[b])), statistic=t, pvalue=float(p[i]),
                     pvalue_corrected=float(adj[i]), direction=dvec, poles=poles_of(cands, dvec, topn))
            for i, ((a, b), (t, _, dvec)) in enumerate(zip(pairs, raw))
        )
        return GroupComparison(contrasts=contrasts, n_perm=B, correction=correction, seed_=seed)

    @staticmethod
    def _contrast(
        u: FloatArray, ia: npt.NDArray[np.int64], ib: npt.NDArray[np.int64], B: int, rng: np.random.Generator
    ) -> tuple[float, float, FloatArray]:
        pooled = u[np.concatenate([ia, ib])]
        na, m = len(ia), len(ia) + len(ib)
        total = pooled.sum(axis=0)
        diff = pooled[:na].mean(axis=0) - pooled[na:].mean(axis=0)
        t = float(np.linalg.norm(diff))
        exceed = 0
        for lo in range(0, B, 256):
            b = min(256, B - lo)
            pick = np.argsort(rng.random((b, m)), axis=1)[:, :na]
            ind = np.zeros((b, m))
            ind[np.arange(b)[:, None], pick] = 1.0
            sa = ind @ pooled  # (b, dim): sums of the permuted group a
            ts = np.linalg.norm(sa / na - (total - sa) / (m - na), axis=1)
            exceed += int(np.count_nonzero(ts >= t * (1 - 1e-12)))
        return t, (1 + exceed) / (B + 1), unit_rows(diff)

