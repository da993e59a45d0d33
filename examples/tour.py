"""The guided tour of thrifty: every capability on real data that ships with its dependencies.

Run it with ``bash scripts/tour.sh`` (the README's first command). Results are printed; plots go to
``examples/output/``. Each capability's part lives in its own module ``examples/tour_<capability>.py``.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent / "output"
PARTS = ["tour_kmeans", "tour_inference", "tour_dpp", "tour_compress", "tour_text"]


def main() -> int:
    OUTPUT.mkdir(exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for name in PARTS:
        try:
            part = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # this capability has no tour part yet
                continue
            raise
        print(f"\n{'=' * 100}\n{part.TITLE}\n{'=' * 100}")
        t0 = time.perf_counter()
        part.run(OUTPUT)
        print(f"[{name} took {time.perf_counter() - t0:.1f} s]")
    print(f"\nPlots written to {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
