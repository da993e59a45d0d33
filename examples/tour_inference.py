"""Tour part: does a supervised subspace of NIR spectra predict meat composition? (thrifty.inference)

Tecator (215 meat samples, 100 NIR absorbances; water, fat, protein) is read from Debian's
r-cran-caret at run time. For each outcome and k = 1..3 PLS components, the held-out OLS refit test
runs on 50 balanced splits; the gate sees the spectra's stable rank (~1) and reroutes to the
NB-permutation test (1000 permutations, splits held fixed), so the table also shows the NB-asymptotic
p under force=True. A row with fat permuted shows the null, and the per-component sequence says how
many components carry signal.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

TITLE = "Supervised-subspace inference (thrifty.inference): PLS tests on Tecator NIR spectra"


def run(output_dir: Path) -> None:
    from thrifty.inference import GateWarning, check_gate, component_tests, subspace_test
    from thrifty.inference.datasets import load_tecator

    try:
        X, endpoints = load_tecator()
    except FileNotFoundError as exc:
        print(f"skipped: {exc}")
        return
    gate = check_gate(X)
    print(f"Tecator: X {X.shape}, gate: n_eff={gate.n_eff:.0f}, stable rank={gate.stable_rank:.2f}"
          f" -> {'reroute to NB-permutation' if gate.reroute else 'NB-asymptotic'} ({'; '.join(gate.reasons)})\n")
    header = f"{'outcome':<16}{'k':>2}  {'test':<15}{'p':>9}{'held-out r':>12}{'95% CI':>18}{'NB p (forced)':>15}{'sec':>6}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    outcomes = {
        "water": endpoints[:, 0],
        "fat": endpoints[:, 1],
        "protein": endpoints[:, 2],
        "fat, permuted": rng.permutation(endpoints[:, 1]),
    }
    results = {}
    for name, y in outcomes.items():
        for k in (1, 2, 3):
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", GateWarning)
                res = subspace_test(X, y, n_components=k, random_state=0, progress=False)
            forced = subspace_test(X, y, n_components=k, random_state=0, force=True)
            dt = time.perf_counter() - t0
            results[(name, k)] = res
            ci = f"[{res.ci[0]:.3f}, {res.ci[1]:.3f}]"
            print(f"{name:<16}{k:>2}  {res.method:<15}{res.p_value:>9.3g}{res.statistic:>12.3f}{ci:>18}"
                  f"{forced.p_value:>15.2g}{dt:>6.2f}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        seq = component_tests(X, endpoints[:, 1], max_components=8, random_state=0, n_perm=999, progress=False)
    print(f"\nPer-component fixed-sequence test for fat (alpha=0.05, {seq.method}): k* = {seq.k_star}, "
          f"p = [{', '.join(f'{p:.3g}' for p in seq.p_values)}]")

    t0 = time.perf_counter()
    subspace_test(X, endpoints[:, 1], random_state=0, force=True)  # timed only
    t_nb = time.perf_counter() - t0
    t0 = time.perf_counter()
    q2 = subspace_test(X, endpoints[:, 1], method="cv-permutation-q2", random_state=0, progress=False)
    t_q2 = time.perf_counter() - t0
    print(f"Cost on fat, k=1: NB-asymptotic {t_nb * 1e3:.0f} ms vs CV-permutation-Q2 (B=1000, 5 folds) "
          f"{t_q2 * 1e3:.0f} ms ({t_q2 / t_nb:.0f}x); Q2 = {q2.statistic:.3f}, p = {q2.p_value:.3g}")
    print("\nOne result in full:")
    print(results[("fat", 3)])

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name in ("fat", "fat, permuted"):
        ax.hist(results[(name, 3)].r, bins=20, alpha=0.6, label=f"{name} (k=3)")
    ax.set_xlabel("held-out Pearson r per split")
    ax.set_ylabel("splits")
    ax.set_title("Tecator: held-out r over 50 balanced splits")
    ax.legend()
    fig.tight_layout()
    fig.savefig(output_dir / "inference_tecator_split_r.png", dpi=120)
    plt.close(fig)
