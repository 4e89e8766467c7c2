#!/usr/bin/env bash
# Sets up a virtual environment (.venv) with PyFlame built from this checkout.
# Sourced by demo.sh and test.sh; installs only from PyPI and Debian.
# Debian's gloo (libgloo-dev) gives pyflame.distributed its CPU backend; without apt the
# build goes on without it.
#   PYFLAME_TEST_DEPS=1   also install what the tests need (PyTorch CPU, pytest, transformers,
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

debian_install() {  # debian_install FILE PACKAGE: the package, unless FILE is there or there is no apt
  [ -e "$1" ] && return
  command -v apt-get > /dev/null || { echo "== no apt-get: $2 not installed"; return; }
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  [ -n "${APT_UPDATED:-}" ] || { $sudo apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2" > /dev/null
}
debian_install /usr/share/cmake/Gloo/GlooConfig.cmake libgloo-dev || echo "== libgloo-dev not installed: no gloo backend"

if [ "${PYFLAME_TEST_DEPS:-0}" = 1 ]; then
  python -m pip install -q "torch==2.13.0" pytest safetensors "transformers==5.24.0"
  debian_install /usr/include/doctest/doctest.h doctest-dev
fi

echo "== building and installing PyFlame (C++ core and Python extension; a GPU flavour where"
echo "   the machine has a GPU and its toolchain, docs/rocm.md)"
python -m pip install -q .
echo "== built $(cd / && python -m pyflame.info --flavour)"
