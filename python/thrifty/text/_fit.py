"""ConceptFit: the result of :meth:`ConceptDirection.fit`, its report, pickling and re-attachment."""

from __future__ import annotations

import html
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty._validation import check_int
from thrifty.inference import SubspaceTestResult
from thrifty.text._corpus import Corpus
from thrifty.text._embeddings import Embeddings
from thrifty.text._results import Axis, Cluster, FloatArray, Poles, Snippet

_DETACHED = ("corpus", "embeddings")


class ConceptFit:
    """A fitted concept direction (returned by :meth:`ConceptDirection.fit`).

    Attributes
    ----------
    test : SubspaceTestResult
        The held-out test of the k-component PLS subspace of the concept vectors.
    beta : ndarray of shape (dim,)
        Unit direction in embedding coordinates along which the outcome grows (the activation pattern
        ``X_c' ŷ`` of the full-data PLS fit on the concept vectors).
    n_components : int
        k used (chosen by the one-SE rule with ``n_components="auto"``).
    k_curve : ndarray of shape (k_max, 2) or None
        ``(mean z, NB se)`` per k for ``"auto"``.
    poles : Poles
        ``.pos`` / ``.neg``: nearest words of ``+beta`` / ``-beta``.
    axes : tuple of Axis
        Varimax axes of the full-data PLS basis with their top words.
    clusters : tuple of Cluster
        k-means clusters of the pole neighbours (``pos`` first), each with its snippets.
    snippets : dict of str to tuple of Snippet
        ``"pos"`` / ``"neg"``: the sentences whose seed contexts align best with each pole.
    scores : ndarray of shape (n_docs,)
        Cosine of each document's concept vector (centred at the kept documents' mean) with ``beta``
        (NaN for dropped documents).
    kept : ndarray of bool, shape (n_docs,)
    y : ndarray of shape (n_docs,)
    lexicon : tuple of str
    window : int
    sif_a : float
    corpus : Corpus or None
        The corpus it came from; None after unpickling until :meth:`attach`.
    embeddings : Embeddings or None
        Likewise (not pickled: embeddings are large).
    """

    def __init__(
        self,
        *,
        test: SubspaceTestResult,
        beta: FloatArray,
        n_components: int,
        k_curve: FloatArray | None,
        poles: Poles,
        axes: tuple[Axis, ...],
        clusters: tuple[Cluster, ...],
        snippets: dict[str, tuple[Snippet, ...]],
        scores: FloatArray,
        kept: npt.NDArray[np.bool_],
        y: FloatArray,
        lexicon: tuple[str, ...],
        window: int,
        sif_a: float,
        corpus_fingerprint: str,
        corpus: Corpus | None,
        embeddings: Embeddings | None,
    ) -> None:
        self.test = test
        self.beta = beta
        self.n_components = n_components
        self.k_curve = k_curve
        self.poles = poles
        self.axes = axes
        self.clusters = clusters
        self.snippets = snippets
        self.scores = scores
        self.kept = kept
        self.y = y
        self.lexicon = lexicon
        self.window = window
        self.sif_a = sif_a
        self.corpus_fingerprint = corpus_fingerprint
        self.corpus = corpus
        self.embeddings = embeddings

    # ---- pickling --------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _DETACHED:
            state[name] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def attach(self, corpus: Corpus, embeddings: Embeddings | None = None) -> ConceptFit:
        """Re-attach an unpickled result to its corpus (and optionally its embeddings).

        Parameters
        ----------
        corpus : Corpus
            Must be the corpus the fit came from (same tokens and sentences).
        embeddings : Embeddings, optional

        Returns
        -------
        self

        Raises
        ------
        TypeError
            Wrong types.
        ValueError
            ``corpus`` is not the one this result was fitted on, or ``embeddings`` has another dimension.
        """
        if not isinstance(corpus, Corpus):
            raise TypeError(f"corpus must be a Corpus, got {type(corpus).__name__}")
        if corpus.fingerprint() != self.corpus_fingerprint:
            raise ValueError("corpus is not the corpus this result was fitted on (its tokens or sentences differ)")
        if embeddings is not None:
            if not isinstance(embeddings, Embeddings):
                raise TypeError(f"embeddings must be an Embeddings, got {type(embeddings).__name__}")
            if embeddings.dim != self.beta.shape[0]:
                raise ValueError(f"embeddings has dimension {embeddings.dim}, the fit {self.beta.shape[0]}")
            self.embeddings = embeddings
        self.corpus = corpus
        return self

    def documents(self, side: Literal["pos", "neg"] = "pos", n: int = 5) -> list[tuple[int, float, str]]:
        """The ``n`` documents scoring highest (``"pos"``) or lowest (``"neg"``): (index, score, text).

        Raises
        ------
        TypeError
            ``n`` not an int.
        ValueError
            Unknown ``side``, ``n`` negative, or the result is not attached to its corpus (after
            unpickling: :meth:`attach`).
        """
        count = check_int(n, "n", 0)
        if side not in ("pos", "neg"):
            raise ValueError(f"side must be 'pos' or 'neg', got {side!r}")
        if self.corpus is None:
            raise ValueError("this result is not attached to its corpus; call attach(corpus) after unpickling")
        idx = np.flatnonzero(self.kept)
        s = self.scores[idx]
        order = idx[np.argsort(-s if side == "pos" else s, kind="stable")][:count]
        return [(int(i), float(self.scores[i]), " ".join(self.corpus.sentences[i])) for i in order]

    # ---- reading ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        t = self.test
        return (
            f"ConceptFit(k={self.n_components}, n_docs={int(self.kept.sum())}/{len(self.kept)}, r^2={t.r2:.4f}, "
            f"p={t.pvalue:.4g}, {self.poles!r})"
        )

    def report(self, format: Literal["text", "markdown", "html"] = "text", n_words: int = 10) -> str:
        """A readable summary: the test, the poles, the clusters and the snippets.

        Parameters
        ----------
        format : {"text", "markdown", "html"}, default="text"
        n_words : int, default=10
            Words shown per pole and cluster.

        Returns
        -------
        str

        Raises
        ------
        TypeError
            ``n_words`` not an int.
        ValueError
            Unknown ``format``, ``n_words`` below 1.
        """
        count = check_int(n_words, "n_words", 1)
        if format not in ("text", "markdown", "html"):
            raise ValueError(f"format must be 'text', 'markdown' or 'html', got {format!r}")
        return _render(self._sections(count), format)

    def _sections(self, n: int) -> list[tuple[str, list[str]]]:
        t = self.test
        lo, hi = t.ci
        stats = [
            f"documents with the concept: {int(self.kept.sum())} of {len(self.kept)}; seeds: {', '.join(self.lexicon)}",
            f"k = {self.n_components}, held-out r = {t.statistic:.4f} (r^2 = {t.r2:.4f}), "
            f"{round(t.confidence_level * 100)}% CI [{lo:.4f}, {hi:.4f}], p = {t.pvalue:.4g} ({t.method})",
        ]
        poles = [
            "+ (higher outcome): " + ", ".join(w for w, _ in self.poles.pos[:n]),
            "- (lower outcome): " + ", ".join(w for w, _ in self.poles.neg[:n]),
        ]
        clusters = [
            f"{c.side} cluster (cos {c.cosine_beta:.3f}): " + ", ".join(w for w, _ in c.words[:n]) for c in self.clusters
        ]
        snippets = [f"{side} [{s.cosine:.3f}] {s.text}" for side in ("pos", "neg") for s in self.snippets[side]]
        axes = [
            f"axis {a.index} (r = {a.r_outcome:.3f}): + " + ", ".join(w for w, _ in a.poles.pos[:n])
            + " | - " + ", ".join(w for w, _ in a.poles.neg[:n])
            for a in self.axes
        ]
        return [("Test", stats), ("Poles", poles), ("Clusters", clusters), ("Snippets", snippets), ("Varimax axes", axes)]


def _render(sections: list[tuple[str, list[str]]], fmt: str) -> str:
    if fmt == "html":
        body = "".join(
            f"<h3>{html.escape(title)}</h3><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"
            for title, lines in sections
        )
        return f"<div class=\"thrifty-concept-report\"><h2>Concept direction</h2>{body}</div>"
    if fmt == "markdown":
        parts = ["## Concept direction"]
        for title, lines in sections:
            parts.append(f"\n### {title}\n")
            parts += [f"- {x}" for x in lines]
        return "\n".join(parts) + "\n"
    parts = ["Concept direction", "=" * 17]
    for title, lines in sections:
        parts.append(f"\n{title}\n{'-' * len(title)}")
        parts += [f"  {x}" for x in lines]
    return "\n".join(parts) + "\n"
