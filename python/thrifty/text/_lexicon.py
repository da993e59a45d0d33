"""lexicon_test: do word vectors predict a word norm (valence, concreteness, ...)? The paper's word-level run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty._validation import RandomState, check_finite_vector, check_int
from thrifty.text._direction import axes_of, fit_direction, poles_of
from thrifty.text._embeddings import Embeddings
from thrifty.text._results import LexiconTestResult


def _lexicon_rows(
    embeddings: Embeddings, words: Sequence[str], values: npt.ArrayLike
) -> tuple[list[int], list[str], np.ndarray[Any, np.dtype[np.float64]], list[str]]:
    """Rows of the words found, their values (duplicates averaged), and the words missing."""
    if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
        raise TypeError(f"words must be a sequence of str, got {type(words).__name__}")
    vals = check_finite_vector(values, "values", len(words))
    sums: dict[str, list[float]] = {}
    for i, w in enumerate(words):
        if not isinstance(w, str):
            raise TypeError(f"words must hold str only, got {type(w).__name__} at position {i}")
        sums.setdefault(w, []).append(float(vals[i]))
    rows, missing = embeddings.lookup(sums)
    found = [embeddings.words[r] for r in rows]
    y = np.array([np.mean(sums[w]) for w in found], dtype=np.float64)
    return rows, found, y, missing


def lexicon_test(
    embeddings: Embeddings,
    words: Sequence[str] | Mapping[str, float],
    values: npt.ArrayLike | None = None,
    n_components: int = 3,
    *,
    n_top: int = 10,
    method: str = "auto",
    n_splits: int = 50,
    n_perm: int = 1000,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    progress: bool | None = None,
) -> LexiconTestResult:
    """Test whether a k-dimensional supervised (PLS) subspace of word vectors predicts a word norm.

    The rows are the vectors of the lexicon words found in ``embeddings`` and the outcome their values
    (a word listed twice gets the mean of its values). The test is
    :func:`thrifty.inference.subspace_test` (PLS, ``n_components``); the direction and the varimax axes
    come from the PLS fit on all words; their poles are the nearest words of the whole vocabulary by
    cosine between vectors centred at the vocabulary mean.

    Parameters
    ----------
    embeddings : Embeddings
    words : sequence of str of length n, or mapping of str to float
        The lexicon (a mapping gives the values too).
    values : array-like of shape (n,), optional
        The norm of every word (finite); required unless ``words`` is a mapping.
    n_components : int, default=3
        Subspace dimension k.
    n_top : int, default=10
        Words per pole.
    method, n_splits, n_perm, random_state, n_jobs, progress
        As in :func:`thrifty.inference.subspace_test` (``method`` must be a split test).

    Returns
    -------
    LexiconTestResult
        ``.test`` (SubspaceTestResult), ``.beta`` (unit, shape (dim,)), ``.poles`` (``.pos``/``.neg``),
        ``.axes`` (varimax axes with their top words), ``.words`` used and ``.missing``.

    Raises
    ------
    TypeError
        ``embeddings`` is not an :class:`Embeddings`, ``words`` not a sequence of str.
    ValueError
        Mismatched lengths, NaN/inf values, constant values, fewer than ``n_components + 5`` words
        found, ``n_components`` above the dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.text import Embeddings, lexicon_test
    >>> rng = np.random.default_rng(0)
    >>> words = [f"w{i}" for i in range(300)]
    >>> vecs = rng.normal(size=(300, 20))
    >>> valence = vecs[:, 0] + 0.3 * rng.normal(size=300)
    >>> res = lexicon_test(Embeddings(words, vecs), words, valence, n_components=1, random_state=0)
    >>> res.test.pvalue < 1e-6, res.test.r2 > 0.8
    (True, True)
    """
    if not isinstance(embeddings, Embeddings):
        raise TypeError(f"embeddings must be an Embeddings, got {type(embeddings).__name__}")
    if isinstance(words, Mapping):
        if values is not None:
            raise ValueError("values must be None when words is a mapping (it holds the values)")
        values = list(words.values())
        words = list(words.keys())
    elif values is None:
        raise ValueError("values is required unless words is a mapping of word -> value")
    k = check_int(n_components, "n_components", 1)
    topn = check_int(n_top, "n_top", 1)
    if k > embeddings.dim:
        raise ValueError(f"n_components must be <= the embedding dimension {embeddings.dim}, got {k}")
    rows, found, y, missing = _lexicon_rows(embeddings, words, values)
    if len(found) < k + 5:
        raise ValueError(f"words: only {len(found)} of {len(set(words))} words have vectors; need n_components + 5 = {k + 5}")
    if np.ptp(y) == 0.0:
        raise ValueError("values are constant over the words found; there is nothing to predict")
    x = np.ascontiguousarray(embeddings.vectors[rows], dtype=np.float64)
    opts = {"method": method, "n_splits": n_splits, "n_perm": n_perm, "random_state": random_state,
            "n_jobs": n_jobs, "progress": progress}
    d = fit_direction(x, y, k, opts)
    centred = embeddings.centered()
    return LexiconTestResult(
        test=d.test, beta=d.beta, poles=poles_of(centred, d.beta, topn), axes=axes_of(centred, d, topn),
        words=tuple(found), missing=tuple(missing),
    )
