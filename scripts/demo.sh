#!/usr/bin/env bash
# One command from a fresh clone: set up, then run the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
python -m pyflame.demo
