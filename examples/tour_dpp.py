"""Tour part: a DPP coreset beside an i.i.d. sample, and the variance they give."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TITLE = "DPP sampling (thrifty.dpp): a Haar-wavelet DPP coreset vs an i.i.d. sample"


def run(output_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    from thrifty.dpp import Coreset, discretize, select_entropy

    # 1) Uniform data in the unit square: the exact variance ratio iid / DPP for m = 1024.
    rng = np.random.default_rng(0)
    n, m = 20_000, 1024
    X = rng.uniform(size=(n, 2))
    f = np.exp(-((X - 0.5) ** 2).sum(1) / (2 * 0.2**2))
    ind = (X.sum(1) < 0.83).astype(float)
    haar = discretize(X, m, kernel="haar")
    print(f"Uniform data, N={n:,}, coreset size m={m}: estimating the mean of f with weights 1/(N K_ii)")
    for name, g in (("smooth Gaussian bump", f), ("indicator of x1 + x2 < 0.83", ind)):
        ratio = (g.var() / m) / haar.exact_variance(g / n)
        print(f"  {name:<30} Var(iid) / Var(Haar DPP) = {ratio:7.1f}   (exact formula, no sampling)")

    # 2) A real data set: digits after PCA to 2 dimensions; coreset of 64 points.
    digits = load_digits()
    Z = PCA(2, random_state=0).fit_transform(digits.data)
    cs = Coreset(Z, 64, kernel="haar", random_state=0, split="quantile")
    iid = rng.choice(len(Z), size=64, replace=False)
    target = (digits.target < 5).astype(float)
    v_dpp = cs.exact_variance(target / len(Z))
    v_iid = target.var() / 64 * (len(Z) - 64) / (len(Z) - 1)
    print(f"\nDigits (N={len(Z)}) after PCA to 2-D, 64-point coreset (Haar DPP on equal-count cells):")
    print(f"  share of digits < 5: true {target.mean():.3f}, DPP coreset {cs.estimate(target) / len(Z):.3f}, "
          f"iid sample {target[iid].mean():.3f}")
    print(f"  variance of the estimate: iid {v_iid:.2e}, DPP {v_dpp:.2e}  (ratio {v_iid / v_dpp:.1f})")

    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharex=True, sharey=True)
    for ax, idx, title in ((axes[0], iid, "i.i.d. uniform sample (64 points)"), (axes[1], cs.indices, "DPP coreset (64 points)")):
        ax.scatter(Z[:, 0], Z[:, 1], s=3, c="lightgray", label="digits (PCA 2-D)")
        size = 12 if idx is iid else 6 + 30 * cs.weights / cs.weights.max()
        ax.scatter(Z[idx, 0], Z[idx, 1], s=size, c="crimson", label="selected")
        ax.set_title(title)
        ax.legend(loc="upper right", fontsize=8)
    fig.suptitle("A DPP spreads the coreset over the data (marker size = weight); the i.i.d. sample clumps and leaves holes")
    fig.tight_layout()
    path = output_dir / "dpp_coreset_vs_iid.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"  picture: {path}")

    # 3) Greedy log-det: pick 5 informative, non-redundant digit classes' mean images.
    means = np.array([digits.data[digits.target == c].mean(0) for c in range(10)])
    cov = np.corrcoef(means)
    sel = select_entropy(cov, 4)
    print(f"\nGreedy entropy selection of 4 of the 10 class-mean images (correlation matrix): classes "
          f"{sel.indices.tolist()}, log det {sel.log_det:.2f}")


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "output"
    out.mkdir(exist_ok=True)
    run(out)
