"""A document-level run of thrifty.text on text that ships with the installed packages: Debian changelogs.

Documents: the entries of every ``/usr/share/doc/*/changelog.Debian.gz`` on this machine (one entry = one
upload's description). Outcome: the upload's urgency, 1 for ``high``/``critical``/``emergency`` and 0 for
``low``/``medium``. Maintainers set the urgency; high urgency mostly marks security or release-critical
fixes, so the question is: *what is being fixed* in urgent uploads compared with ordinary ones? The concept
is "fix" (seeds: fix, fixes, fixed, fixing); pole words are those seen >= 3 times; its per-entry concept vector is the SIF-weighted mean of the
words within ±3 tokens of a seed; words are embedded one by one with all-MiniLM-L6-v2 (offline wheel).

Sampling: entries containing a seed, at most ``--per-package`` per (source package, outcome), so that a few
packages with huge changelogs (the kernel) do not dominate; both classes then subsampled to equal size.
Caveats: urgency is a maintainer's label, packages differ in style (the cap limits, not removes, that
confound), the set of installed packages depends on the machine, and entries sometimes state their urgency
in words ("urgency=high because ..."), which the direction may pick up: a description, not a causal claim.

    HF_HUB_OFFLINE=1 .venv/bin/python benches/text_changelog.py > benches/output/text_changelog.txt
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections import defaultdict

import numpy as np

SEEDS = ("fix", "fixes", "fixed", "fixing")
URGENT = frozenset({"high", "critical", "emergency"})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-package", type=int, default=10)
    ap.add_argument("--max-docs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-count", type=int, default=3, help="pole words seen at least this often")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from thrifty.inference import GateWarning
    from thrifty.text import ConceptDirection, Corpus, Embeddings
    from thrifty.text.datasets import debian_changelogs, minilm_dir

    warnings.simplefilter("ignore", GateWarning)
    rng = np.random.default_rng(args.seed)
    texts, urgency, packages = debian_changelogs()
    print(f"{len(texts)} changelog entries from {len(set(packages))} source packages; "
          f"urgent (high/critical/emergency): {sum(u in URGENT for u in urgency)}")
    full = Corpus(texts)
    has_seed = full.contains(SEEDS)
    cells: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for i in np.flatnonzero(has_seed):
        cells[(packages[i], urgency[i] in URGENT)].append(int(i))
    pools: dict[bool, list[int]] = {True: [], False: []}
    for (_, urg), idx in cells.items():
        pools[urg] += [int(i) for i in rng.permutation(idx)[: args.per_package]]
    m = min(len(pools[True]), len(pools[False]), args.max_docs // 2)
    chosen = sorted(int(i) for urg in (True, False) for i in rng.permutation(pools[urg])[:m])
    corpus = Corpus([texts[i] for i in chosen])
    y = np.array([float(urgency[i] in URGENT) for i in chosen])
    print(f"sample: {len(chosen)} entries holding a seed ({m} urgent, {m} not; at most {args.per_package} per "
          f"package and class, from {len({packages[i] for i in chosen})} packages)")

    seeds = frozenset(SEEDS)
    context = {t for d in corpus.docs for s in d for j, t in enumerate(s)
               if any(u in seeds for u in s[max(0, j - 3) : j + 4])}
    words = sorted(context | seeds)
    t0 = time.perf_counter()
    emb = Embeddings.from_encoder(minilm_dir(), words)
    print(f"embedded {len(words)} context words with MiniLM in {time.perf_counter() - t0:.1f} s")

    cd = ConceptDirection(emb, corpus, y, SEEDS, window=3, sif_a=1e-3)
    t0 = time.perf_counter()
    fit = cd.fit(1, n_top=15, n_clusters=3, min_count=args.min_count, random_state=args.seed)
    print(f"fit + test in {time.perf_counter() - t0:.1f} s\n")
    print(fit.report(n_words=12))
    scores = fit.scores[fit.kept]
    print(f"mean score: urgent {scores[y[fit.kept] == 1].mean():+.4f}, other {scores[y[fit.kept] == 0].mean():+.4f}")

    levels = [urgency[i] if urgency[i] in ("low", "medium") else "high+" for i in chosen]
    groups = cd.compare_groups(levels, n_perm=2000, random_state=args.seed)
    print("\ngroup comparison by urgency level (permutation, Holm):")
    print(repr(groups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
