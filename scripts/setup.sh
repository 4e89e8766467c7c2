#!/usr/bin/env bash
# Sets up a virtual environment (.venv) with PyFlame built from this checkout.
# Sourced by demo.sh and test.sh; installs only from PyPI and Debian.
#   PYFLAME_TEST_DEPS=1   also install what the tests need (PyTorch CPU, pytest,
#                         safetensors, doctest for the C++ tests)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
python -m pip install -q cmake ninja
python -m pip install -q tqdm matplotlib  # the demo's progress bar and plot

if [ "${PYFLAME_TEST_DEPS:-0}" = 1 ]; then
  python -m pip install -q "torch==2.13.0" pytest safetensors
  if [ ! -f /usr/include/doctest/doctest.h ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq doctest-dev >/dev/null
  fi
fi

echo "== building and installing PyFlame (C++ core and Python extension; a GPU flavour where"
echo "   the machine has a GPU and its toolchain, docs/rocm.md)"
python -m pip install -q .
echo "== built $(cd / && python -m pyflame.info --flavour)"
