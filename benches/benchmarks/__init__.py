"""asv benchmarks for thrifty, one module per capability.

They run against the package installed in the current environment (``environment_type: existing``),
i.e. the working tree built by ``scripts/setup.sh``::

    cd benches && ../.venv/bin/asv run --python=same --quick --show-stderr

Side-by-side comparisons against peers (printing ratios) are the ``benches/compare_*.py`` scripts.
"""
