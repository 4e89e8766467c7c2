"""Seed 001's examples that use the GPU ops of this release, run as written on 'rocm':
"Running Operations", "Synchronization" and "Numerical Differences from CPU" (skipped,
with the reason, without a usable GPU); "Running Operations" also on the CPU."""

import textwrap

import pytest

import pyflame as pf

needs_gpu = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")

RUNNING_OPERATIONS = """
import pyflame as pf

pf.set_device('rocm')

# Create tensors
a = pf.randn(1024, 1024)
b = pf.randn(1024, 1024)

# Matrix multiplication (uses rocBLAS)
c = pf.matmul(a, b)

# Activation functions
x = pf.randn(10000)
y_relu = pf.relu(x)
y_gelu = pf.gelu(x)
y_silu = pf.silu(x)

# Convolution (uses MIOpen)
input = pf.randn(32, 3, 224, 224)
weight = pf.randn(64, 3, 7, 7)
output = pf.conv2d(input, weight, stride=2, padding=3)
"""

SYNCHRONIZATION = """
import pyflame as pf
import time

pf.set_device('rocm')

x = pf.randn(10000, 10000)

start = time.time()
for _ in range(100):
    y = pf.matmul(x, x)
pf.synchronize()  # Wait for all operations to complete
elapsed = time.time() - start

print(f"Time: {elapsed:.3f}s")
"""

# The seed's snippet uses `a` and `b` from "Running Operations".
NUMERICAL_DIFFERENCES = """
pf.set_device('rocm')
result_gpu = pf.matmul(a, b).numpy()

pf.set_device('cpu')
result_cpu = pf.matmul(a, b).numpy()

import numpy as np
np.testing.assert_allclose(result_gpu, result_cpu, rtol=1e-5, atol=1e-6)
"""


def _run(source, namespace):
    exec(compile(textwrap.dedent(source), "<seed example>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("device", ["cpu", pytest.param("rocm", marks=needs_gpu)])
def test_running_operations(device):
    ns = _run(RUNNING_OPERATIONS.replace("'rocm'", repr(device)), {})
    assert ns["c"].shape == (1024, 1024) and ns["output"].shape == (32, 64, 112, 112)
    pf.set_device("cpu")


@needs_gpu
def test_numerical_differences_as_written():
    # The snippet's tolerance (rtol 1e-5, atol 1e-6) holds when the products are exact in
    # float32: small integers. With randn inputs, 1024-term float32 sums in two summation
    # orders differ by up to about 1e-4 (docs/rocm.md); the next test checks that bound.
    pf.set_device("rocm")
    ns = {"pf": pf, "a": pf.randint(-8, 9, (1024, 1024)).to(pf.float32),
          "b": pf.randint(-8, 9, (1024, 1024)).to(pf.float32)}
    _run(NUMERICAL_DIFFERENCES, ns)


@needs_gpu
def test_numerical_differences_random_inputs():
    ns = _run(RUNNING_OPERATIONS, {})
    _run(NUMERICAL_DIFFERENCES.replace("rtol=1e-5, atol=1e-6", "rtol=1e-4, atol=2e-4"), ns)


@needs_gpu
def test_synchronization(capsys):
    _run(SYNCHRONIZATION, {})
    assert capsys.readouterr().out.startswith("Time: ")
    pf.set_device("cpu")
