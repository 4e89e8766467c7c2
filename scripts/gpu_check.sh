#!/usr/bin/env bash
# On the GPU machine (NVIDIA, through the device tool): build the ROCm backend's
# NVIDIA flavour from a clean tree, run every C++ and Python test with the GPU,
# the GPU C++ tests under compute-sanitizer (memcheck, racecheck), the demo and
# the benchmarks (ops, training, whole models, model shapes). Logs go to $OUT
# (default ./gpu_check_out); summary.txt lists each step's status.
#
#   scripts/gpu_check.sh [--wheel FILE] [STEP...]
#
# Steps, in this order (default: all): build, cpp_tests, sanitizer, python_tests, demo,
# rocm_benchmark, training_benchmark, compile_benchmark, llm_benchmark, models, shapes, distributed (two GPUs); `tests` names
# cpp_tests to demo and `benchmarks` the last six. All of them take longer than one device call may run (10
# minutes), so the check runs in parts: `build tests` first, whose wheel comes back in
# $OUT/wheel (parts under 16 MiB: cat them together), then `--wheel FILE sanitizer` and
# `--wheel FILE benchmarks` (or single benchmarks) on that wheel instead of a build.
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
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=16

WHEEL=""
if [ "${1:-}" = "--wheel" ]; then
  WHEEL=$2
  shift 2
fi
ALL_STEPS="build cpp_tests sanitizer python_tests demo"
ALL_STEPS+=" rocm_benchmark training_benchmark compile_benchmark llm_benchmark models shapes distributed"
REQUESTED=" $(echo "${*:-$ALL_STEPS}" | sed -e 's/\btests\b/cpp_tests python_tests demo/' \
  -e 's/\bbenchmarks\b/rocm_benchmark training_benchmark compile_benchmark llm_benchmark models shapes distributed/') "
wanted() { [[ "$REQUESTED" == *" $1 "* ]]; }

# The benchmarks record the commit measured; the GPU machine's copy of the tree may carry a stale
# .git, so the commit written next to the carried wheel (.whl/commit) wins where there is one.
if [ -z "${PYFLAME_COMMIT:-}" ] && [ -f .whl/commit ]; then export PYFLAME_COMMIT=$(cat .whl/commit); fi

step() {  # step NAME COMMAND...: run, log to $LOGS/NAME.log, record the status
  local name=$1
  shift
  local t0=$SECONDS
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$SUMMARY"
  if [ $rc -ne 0 ]; then tail -n 40 "$LOGS/$name.log"; fi
  return $rc
}

# PyFlame and the wheels the machine lacks (scipy-openblas32, pytest and its dependencies) go into
# one folder on the path.
SITE=/tmp/pf_site
for w in .whl/*.whl; do
  [[ "$w" == .whl/pyflame-* ]] || [ ! -f "$w" ] || python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target $SITE "$w" 2> /dev/null
done
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$LOGS/gpu.txt" 2>&1
echo "commit ${PYFLAME_COMMIT:-unknown}; steps:$REQUESTED; $(cat "$LOGS/gpu.txt")" >> "$SUMMARY"

if wanted build; then
  # What `pip install .` would build here with no settings (cmake/detect_gpu.cmake): the NVIDIA flavour.
  step detect bash -c "cmake -S . -B /tmp/pf_detect -G Ninja > /tmp/pf_detect.txt; grep 'PyFlame:' /tmp/pf_detect.txt \
    && grep -q 'PyFlame: building the nvidia GPU flavour' /tmp/pf_detect.txt"
  export PYFLAME_USE_ROCM=1 PYFLAME_HIP_PLATFORM=nvidia
  step build python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/pf_wheel -Cbuild-dir=/tmp/pf_build . || exit 1
  WHEEL=$(ls /tmp/pf_wheel/pyflame-*.whl)
  mkdir -p "$OUT/wheel" && (cd "$OUT/wheel" && split -b 15M "$WHEEL" part_ && basename "$WHEEL" > name)
fi
[ -n "$WHEEL" ] || { echo "no wheel: run the build step or pass --wheel FILE" | tee -a "$SUMMARY"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target $SITE "$WHEEL" || exit 1
cd /tmp  # import the installed package, not the source tree
step info python3 -m pyflame.info
PREFIX=$(python3 -m pyflame.info --cmake-prefix-path)
cd - > /dev/null

if wanted cpp_tests || wanted sanitizer; then
  step cpp_build bash -c "cmake -S tests/cpp -B /tmp/pf_cpp -G Ninja -DCMAKE_PREFIX_PATH='$PREFIX' \
    -DPYFLAME_DOCTEST_INCLUDE=$PWD/.whl && cmake --build /tmp/pf_cpp"
fi
wanted cpp_tests && step cpp_tests ctest --test-dir /tmp/pf_cpp --output-on-failure
if wanted sanitizer; then
  # The out-of-memory test makes the runtime report failed calls on purpose; memcheck runs the rest.
  step memcheck compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 /tmp/pf_cpp/pyflame_rocm_tests \
    --test-case-exclude="out of memory*"
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 /tmp/pf_cpp/pyflame_rocm_tests
fi
if wanted python_tests; then
  # One process per core where pytest-xdist is there (the GPU is shared; a test's memory is small).
  PARALLEL=$(python3 -c "import xdist" 2> /dev/null && echo "-n 16")
  step python_tests python3 -m pytest tests/python -q -rs -p no:cacheprovider $PARALLEL
fi
wanted demo && step demo python3 -m pyflame.demo
if wanted rocm_benchmark; then
  step rocm_benchmark python3 benchmarks/rocm_benchmark.py --all --out "$OUT"
  cat "$LOGS/rocm_benchmark.log"
fi
# Training steps, graph mode, LLM inference, whole models (issues 21, 23, 25; docs/perf.md): each next to PyTorch.
for bench in training_benchmark compile_benchmark llm_benchmark models; do
  if wanted $bench; then
    step $bench python3 "benchmarks/$bench.py" --json "$OUT/$bench.json"
    cat "$LOGS/$bench.log"
  fi
done
if wanted shapes; then
  step shapes python3 benchmarks/shapes.py --json "$OUT/shapes.json"
  sed -n '/== summary/,$p' "$LOGS/shapes.log"
fi
# Peer copies, all_reduce and DDP next to torch.distributed (issue 24): on a machine with two GPUs.
if wanted distributed; then
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    step distributed python3 benchmarks/distributed_benchmark.py --json "$OUT/distributed.json"
    cat "$LOGS/distributed.log"
  else
    echo "distributed                  skipped: one GPU (use a two-GPU machine kind)" | tee -a "$SUMMARY"
  fi
fi
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
cat "$SUMMARY"
! grep "rc=" "$SUMMARY" | grep -qv "rc=0"
