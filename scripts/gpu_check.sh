#!/usr/bin/env bash
# On the GPU machine (NVIDIA, through the device tool): build the ROCm backend's
# NVIDIA flavour from a clean tree, run every C++ and Python test with the GPU,
# the GPU C++ tests under compute-sanitizer (memcheck, racecheck), the demo and
# the benchmarks (ops, training, whole models, model shapes). Logs go to $OUT
# (default ./gpu_check_out); summary.txt lists each step's status.
#
# The machine cannot install packages: Python wheels it lacks (scipy-openblas32,
# pytest) and doctest's header travel in .whl/ (see docs/rocm.md, "GPU checks").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
LOGS="$OUT/logs"  # packed into logs.tar.gz at the end (the device tool returns few files)
mkdir -p "$LOGS"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
export PYTHONUNBUFFERED=1
# The benchmarks record the commit measured; the GPU machine's copy of the tree may carry a stale
# .git, so the commit written next to the carried wheel (.whl/commit) wins where there is one.
if [ -z "${PYFLAME_COMMIT:-}" ] && [ -f .whl/commit ]; then export PYFLAME_COMMIT=$(cat .whl/commit); fi

step() {  # step NAME COMMAND...: run, log to $OUT/NAME.log, record the status
  local name=$1
  shift
  local t0=$SECONDS
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$SUMMARY"
  if [ $rc -ne 0 ]; then tail -n 40 "$LOGS/$name.log"; fi
  return $rc
}

if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/pf_site .whl/*.whl 2> /dev/null
  export PYTHONPATH=/tmp/pf_site${PYTHONPATH:+:$PYTHONPATH}
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$LOGS/gpu.txt" 2>&1

# What `pip install .` would build here with no settings (cmake/detect_gpu.cmake): the NVIDIA flavour.
step detect bash -c "cmake -S . -B /tmp/pf_detect -G Ninja > /tmp/pf_detect.txt; grep 'PyFlame:' /tmp/pf_detect.txt \
  && grep -q 'PyFlame: building the nvidia GPU flavour' /tmp/pf_detect.txt"
export PYFLAME_USE_ROCM=1 PYFLAME_HIP_PLATFORM=nvidia CMAKE_BUILD_PARALLEL_LEVEL=16
step build python3 -m pip install -v --no-build-isolation --no-deps --force-reinstall -Cbuild-dir=/tmp/pf_build . || exit 1
cd /tmp  # import the installed package, not the source tree
PREFIX=$(python3 -m pyflame.info --cmake-prefix-path)
cd - > /dev/null
step info python3 -m pyflame.info
step cpp_build bash -c "cmake -S tests/cpp -B /tmp/pf_cpp -G Ninja -DCMAKE_PREFIX_PATH='$PREFIX' \
  -DPYFLAME_DOCTEST_INCLUDE=$PWD/.whl && cmake --build /tmp/pf_cpp"
step cpp_tests ctest --test-dir /tmp/pf_cpp --output-on-failure
# The out-of-memory test makes the runtime report failed calls on purpose; memcheck runs the rest.
step memcheck compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 /tmp/pf_cpp/pyflame_rocm_tests \
  --test-case-exclude="out of memory*"
step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 /tmp/pf_cpp/pyflame_rocm_tests
step python_tests python3 -m pytest tests/python -q -rs -p no:cacheprovider
step demo python3 -m pyflame.demo
step rocm_benchmark python3 benchmarks/rocm_benchmark.py --all --out "$OUT"
cat "$LOGS/rocm_benchmark.log"
step training_benchmark python3 benchmarks/training_benchmark.py --json "$OUT/training_benchmark.json"
cat "$LOGS/training_benchmark.log"
# Whole models and the shapes they run, next to PyTorch (issue 21; docs/perf.md).
step models python3 benchmarks/models.py --json "$OUT/models.json"
cat "$LOGS/models.log"
step shapes python3 benchmarks/shapes.py --json "$OUT/shapes.json"
sed -n '/== summary/,$p' "$LOGS/shapes.log"
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
cat "$SUMMARY"
! grep -qv "rc=0" "$SUMMARY"
