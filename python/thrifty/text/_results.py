"""Result types of :mod:`thrifty.text` (small frozen dataclasses with a readable ``repr``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty.inference import SubspaceTestResult

FloatArray = npt.NDArray[np.float64]
WordScores = tuple[tuple[str, float], ...]


def _words(ws: WordScores, n: int = 8) -> str:
    return ", ".join(w for w, _ in ws[:n])


@dataclass(frozen=True)
class Poles:
    """The words nearest each end of a direction (cosine similarity, best first).

    Attributes
    ----------
    pos : tuple of (str, float)
        Nearest to ``+direction`` (higher outcome).
    neg : tuple of (str, float)
        Nearest to ``-direction`` (lower outcome).
    """

    pos: WordScores
    neg: WordScores

    def __repr__(self) -> str:
        return f"Poles(pos=[{_words(self.pos)}], neg=[{_words(self.neg)}])"


@dataclass(frozen=True, repr=False)
class Axis:
    """One varimax axis of the fitted subspace.

    Attributes
    ----------
    index : int
    vector : ndarray of shape (dim,)
        The axis's activation pattern in embedding coordinates (unit length), signed so that its score
        correlates non-negatively with the outcome.
    r_outcome : float
        In-sample Pearson r between the axis score and the outcome (descriptive, not a test).
    poles : Poles
        The words nearest each end of the axis.
    """

    index: int
    vector: FloatArray
    r_outcome: float
    poles: Poles

    def __repr__(self) -> str:
        return (
            f"Axis({self.index}, r={self.r_outcome:+.3f}, pos=[{_words(self.poles.pos)}], "
            f"neg=[{_words(self.poles.neg)}])"
        )


@dataclass(frozen=True, repr=False)
class LexiconTestResult:
    """Outcome of :func:`thrifty.text.lexicon_test`.

    Attributes
    ----------
    test : SubspaceTestResult
        The held-out test of the k-dimensional PLS subspace of the word vectors.
    beta : ndarray of shape (dim,)
        Unit direction in embedding coordinates along which the outcome grows: the activation pattern
        ``X_c' ŷ`` of the full-data PLS fit (Haufe et al. 2014; robust to near-constant dimensions).
    poles : Poles
        Words nearest ``+beta`` and ``-beta``.
    axes : tuple of Axis
        Varimax axes of the full-data PLS basis with their top words.
    words : tuple of str
        The lexicon words used (found in the embeddings).
    missing : tuple of str
        Lexicon words without a vector (left out).
    """

    test: SubspaceTestResult
    beta: FloatArray
    poles: Poles
    axes: tuple[Axis, ...]
    words: tuple[str, ...]
    missing: tuple[str, ...]

    def __repr__(self) -> str:
        t = self.test
        lines = [
            f"LexiconTestResult(n_words={len(self.words)}, missing={len(self.missing)}, k={t.n_components})",
            f"  r^2 {t.r2:.4f}  held-out r {t.statistic:.4f}  p {t.pvalue:.4g}  ({t.method})",
            f"  {self.poles!r}",
        ]
        lines += [f"  {a!r}" for a in self.axes]
        return "\n".join(lines)


@dataclass(frozen=True)
class Snippet:
    """A sentence whose seed-word context aligns with a direction.

    Attributes
    ----------
    doc : int
        Document index in the corpus.
    sentence : int
        Sentence index within the document.
    seed : str
        The lexicon word whose context window was scored.
    text : str
        The sentence.
    cosine : float
        Cosine between the context vector and the direction.
    """

    doc: int
    sentence: int
    seed: str
    text: str
    cosine: float


@dataclass(frozen=True, repr=False)
class Cluster:
    """A k-means cluster of pole neighbours.

    Attributes
    ----------
    side : str
        ``"pos"`` or ``"neg"``.
    words : tuple of (str, float)
        Member words with their cosine to the cluster centroid, best first.
    centroid : ndarray of shape (dim,)
        Unit mean of the members' unit vectors.
    cosine_beta : float
        Cosine between the centroid and ``+beta`` (``"pos"``) or ``-beta`` (``"neg"``).
    snippets : tuple of Snippet
        Sentences whose contexts align best with the centroid.
    """

    side: str
    words: WordScores
    centroid: FloatArray
    cosine_beta: float
    snippets: tuple[Snippet, ...] = ()

    def __repr__(self) -> str:
        return f"Cluster({self.side}, cos={self.cosine_beta:.3f}, n={len(self.words)}, [{_words(self.words)}])"


@dataclass(frozen=True, repr=False)
class Contrast:
    """One pairwise group contrast of :meth:`ConceptDirection.compare_groups`.

    Attributes
    ----------
    groups : tuple of (label, label)
    n : tuple of (int, int)
        Documents with a concept vector in each group.
    statistic : float
        ``||mean_a - mean_b||`` of the unit concept vectors.
    pvalue : float
        Permutation p ``(1 + #{T* >= T}) / (n_perm + 1)`` (group labels shuffled within the pair).
    pvalue_corrected : float
        Holm-adjusted across the contrasts (or the raw p with ``correction=None``).
    direction : ndarray of shape (dim,)
        Unit ``mean_a - mean_b``.
    poles : Poles
        ``pos``: words nearest group a's side; ``neg``: group b's.
    """

    groups: tuple[Any, Any]
    n: tuple[int, int]
    statistic: float
    pvalue: float
    pvalue_corrected: float
    direction: FloatArray
    poles: Poles

    def __repr__(self) -> str:
        a, b = self.groups
        return (
            f"Contrast({a!r} vs {b!r}, n={self.n}, T={self.statistic:.4f}, p={self.pvalue:.4g}, "
            f"p_adj={self.pvalue_corrected:.4g}, {a!r}: [{_words(self.poles.pos, 6)}], {b!r}: [{_words(self.poles.neg, 6)}])"
        )


@dataclass(frozen=True, repr=False)
class GroupComparison:
    """Outcome of :meth:`ConceptDirection.compare_groups`.

    Attributes
    ----------
    contrasts : tuple of Contrast
        Every pair of groups, in sorted label order.
    n_perm : int
    correction : str or None
    seed_ : int
        Pass back as ``random_state`` to reproduce.
    """

    contrasts: tuple[Contrast, ...]
    n_perm: int
    correction: str | None
    seed_: int

    def __repr__(self) -> str:
        head = f"GroupComparison(n_perm={self.n_perm}, correction={self.correction!r})"
        return "\n".join([head] + [f"  {c!r}" for c in self.contrasts])
