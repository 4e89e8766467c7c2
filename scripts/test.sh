#!/usr/bin/env bash
# One command from a fresh clone: set up, then run every test (C++ and Python).
# GPU tests skip with a reason on a machine without a GPU; scripts/gpu_check.sh
# runs them on one.
set -euo pipefail
cd "$(dirname "$0")/.."
PYFLAME_TEST_DEPS=1 source scripts/setup.sh

prefix=$(python -m pyflame.info --cmake-prefix-path)
echo "== C++ tests (built against the installed package with find_package)"
cmake -S tests/cpp -B build/cpp-tests -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/cpp-tests
ctest --test-dir build/cpp-tests --output-on-failure

echo "== C++ example"
cmake -S examples/cpp -B build/example -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/example
./build/example/hello_pyflame

echo "== Python tests"
python examples/quickstart.py >/dev/null
python -m pytest tests/python -q
