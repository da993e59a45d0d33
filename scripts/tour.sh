#!/usr/bin/env bash
# The guided tour of thrifty's capabilities on real data that ships with its dependencies. Prints
# results and writes plots to examples/output/. Sets itself up first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/tour.py "$@"
