"""The shared device headers (kernels/functors.h and what it includes) compile under
the run-time compilers, as the library embeds them (CMakeLists.txt, _rtc_headers):
every elementwise functor of the op table, instantiated for the types its family
computes in, and the kernels graph mode generates for fused elementwise chains
(every dtype and layout), through hiprtc for an AMD wave64 target (gfx90a, CDNA2) and
a wave32 one (gfx1030, RDNA2), and through NVRTC for sm_90. The compilers need no GPU (CI
runs hiprtc from Debian's libamdhip64); one that cannot be loaded skips, unless
PYFLAME_REQUIRE_RTC names it (scripts/compile_gpu_flavours.sh: hiprtc)."""

import ctypes
import ctypes.util
import os
import re
from pathlib import Path

import pytest

import pyflame as pf

ROOT = Path(__file__).resolve().parents[2]


def _embedded_headers():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    listed = re.search(r"set\(_rtc_headers([^)]*)\)", cmake).group(1).split()
    return {re.sub(r"^(include|src)/", "", h): (ROOT / h).read_bytes() for h in listed}


def _functor_source():
    """One kernel per functor of the op table, calling it on the types its family computes in."""
    floats, ints = ("float", "double"), ("int", "long long", "bool")
    types_of = {"UNARY": floats + ints[:2], "UNARY_FLOAT": floats, "UNARY_BOOL": floats + ints,
                "UNARY_INT": ints, "BINARY": floats + ints[:2], "BINARY_FLOAT": floats, "BINARY_INT": ints,
                "COMPARE": floats + ints, "CLAMP": floats + ints[:2]}
    lines = ['#include "kernels/functors.h"', "using namespace pyflame::kernels;",
             "template <class F, class T> __device__ void call(const F& f, T* x) {",
             "  if constexpr (requires { f(x[0], x[1]); }) x[2] = T(f(x[0], x[1]));",
             "  else x[2] = T(f(x[0]));", "}"]
    ops = re.findall(r"^PF_OP\((\w+), (\w+), (\w+),", (ROOT / "include/pyflame/ops.def").read_text(), re.M)
    count = 0
    for name, family, functor in ops:
        for t in types_of.get(family, ()):
            if functor == "-":
                continue
            cname = t.replace(" ", "_")
            lines.append(f'extern "C" __global__ void {name}_{cname}({t}* x, {functor}<{t}> f) {{ call(f, x); }}')
            count += 1
    assert count > 150, "the op table's elementwise functors were not found"
    return "\n".join(lines).encode()


def _compilers():
    found = []
    for name in ("libhiprtc.so", "libhiprtc.so.6", "libamdhip64.so", "libamdhip64.so.5"):
        try:
            lib = ctypes.CDLL(name)
            if hasattr(lib, "hiprtcCreateProgram"):
                found += [("hiprtc", lib, "gfx90a"), ("hiprtc", lib, "gfx1030")]
                break
        except OSError:
            continue
    nvrtc = ctypes.util.find_library("nvrtc")
    if nvrtc:
        found.append(("nvrtc", ctypes.CDLL(nvrtc), "sm_90"))
    return found


COMPILERS = _compilers()


def test_required_compiler_loads():
    required = os.environ.get("PYFLAME_REQUIRE_RTC")
    if not required:
        pytest.skip("PYFLAME_REQUIRE_RTC is not set")
    assert required in {p for p, _, _ in COMPILERS}, f"{required} could not be loaded"


def _compile(prefix, lib, target, source):
    """Compiles `source` as the library does; returns the compiler's log, or None on success."""
    headers = _embedded_headers()
    fn = lambda n: getattr(lib, prefix + n)  # noqa: E731
    prog = ctypes.c_void_p()
    names = (ctypes.c_char_p * len(headers))(*[n.encode() for n in headers])
    texts = (ctypes.c_char_p * len(headers))(*headers.values())
    assert fn("CreateProgram")(ctypes.byref(prog), source, b"kernel.cu", len(headers), texts, names) == 0
    # The library's options (hip_compat.h's PF_RTC_OPTIONS).
    options = [b"--offload-arch=" + target.encode(), b"-std=c++20"] if prefix == "hiprtc" else \
        [b"--gpu-architecture=" + target.encode(), b"-std=c++20", b"-default-device"]
    status = fn("CompileProgram")(prog, len(options), (ctypes.c_char_p * len(options))(*options))
    size = ctypes.c_size_t()
    fn("GetProgramLogSize")(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    fn("GetProgramLog")(prog, log)
    fn("DestroyProgram")(ctypes.byref(prog))
    return None if status == 0 else log.value.decode(errors="replace")[:4000]


_NEEDS_COMPILER = pytest.mark.skipif(not COMPILERS, reason="neither hiprtc (libamdhip64) nor NVRTC can be loaded here")
_EACH_COMPILER = pytest.mark.parametrize("prefix, lib, target", COMPILERS, ids=[f"{p}-{t}" for p, _, t in COMPILERS])


@_NEEDS_COMPILER
@_EACH_COMPILER
def test_every_functor_compiles_at_run_time(prefix, lib, target):
    log = _compile(prefix, lib, target, _functor_source())
    assert log is None, log


# relu(x * w + b) * 0.5 with leaky_relu, a sigmoid and a join; one step alone.
_CHAINS = [[("mul", [0, 1]), ("add", [-1, 2]), ("relu", [-2]), ("leaky_relu", [-3], [0.1]), ("sigmoid", [-4]),
            ("mul", [-5, 3]), ("add", [-6, -3])],
           [("tanh", [0])]]


@_NEEDS_COMPILER
@_EACH_COMPILER
def test_generated_fused_kernels_compile(prefix, lib, target):
    """Every dtype, with and without a Python number, flat (packed or not) and strided (element by
    element, or by rows)."""
    for steps in _CHAINS:
        inputs = 1 + max(a for step in steps for a in step[1])
        for dtype in (pf.float32, pf.float16, pf.bfloat16, pf.float64):
            for number in ([False] * inputs, [False] * (inputs - 1) + [True]):
                if all(number):
                    continue
                for ndim, vec, rows in ((0, 1, False), (0, 16 // dtype.itemsize, False), (3, 1, False), (2, 1, True)):
                    source = pf._C._fused_elementwise_source(steps, dtype, number, ndim, vec, rows)
                    log = _compile(prefix, lib, target, source.encode())
                    assert log is None, f"{dtype} {number} ndim={ndim} vec={vec}:\n{log}\n{source}"


@_NEEDS_COMPILER
@_EACH_COMPILER
def test_generated_fused_reductions_compile(prefix, lib, target):
    """Each dtype with another reduction, layout (output dims, reduced dims) and kind of write
    (finished, or parts for the finishing kernel), with and without a Python number; then the
    finishing kernels."""
    layouts = [("sum", 0, 1, False), ("mean", 1, 1, True), ("max", 2, 2, False), ("min", 1, 2, True)]
    dtypes = (pf.float32, pf.float16, pf.bfloat16, pf.float64)
    for steps in _CHAINS:
        inputs = 1 + max(a for step in steps for a in step[1])
        for dtype, (reduce, kept, reduced, partial) in zip(dtypes, layouts):
            for number in ([False] * inputs, [False] * (inputs - 1) + [True]):
                if all(number):
                    continue
                source = pf._C._fused_reduction_source(steps, reduce, dtype, number, kept, reduced, partial)
                log = _compile(prefix, lib, target, source.encode())
                assert log is None, f"{reduce} {dtype} {number} kept={kept} reduced={reduced}:\n{log}\n{source}"
    for dtype, (reduce, *_) in zip(dtypes, layouts):
        log = _compile(prefix, lib, target, pf._C._fused_reduction_finish_source(reduce, dtype).encode())
        assert log is None, log
