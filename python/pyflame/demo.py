"""`python -m pyflame.demo`: the device report, then a short workload on the
best available device (a GPU through the ROCm backend when one is usable,
else the CPU), with timings."""

import statistics
import sys
import time

import numpy as np

import pyflame as pf
from pyflame.info import report


def _median_ms(fn, repeat=10):
    fn()  # warm-up
    pf.synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        pf.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


# Every op the workload below uses.
_WORKLOAD_OPS = ("matmul", "add", "mul", "relu", "softmax", "gelu", "sum")


def main():
    print(report())
    device = "cpu"
    if pf.rocm_is_available():
        missing = [op for op in _WORKLOAD_OPS if not pf.has_kernel(op, "rocm")]
        if missing:
            print(f"\nThe GPU is usable, but this build has no GPU kernels yet for: {', '.join(missing)} "
                  "(docs/ops.md); running the workload on the CPU.")
        else:
            device = "rocm"
    pf.set_device(device)
    print(f"\nWorkload on '{pf.get_device()}':")
    pf.manual_seed(0)

    # The spec's MLP (784-256-128-10) forward pass on a batch of 32.
    weights = [(pf.randn(i, o) * (1.0 / i) ** 0.5, pf.zeros(o)) for i, o in ((784, 256), (256, 128), (128, 10))]
    x = pf.randn(32, 784)

    def mlp():
        h = x
        for k, (w, b) in enumerate(weights):
            h = h @ w + b
            if k < len(weights) - 1:
                h = pf.relu(h)
        return pf.softmax(h, dim=-1)

    probs = mlp()
    ok = np.allclose(pf.sum(probs, dim=1).numpy(), 1.0, atol=1e-5)
    print(f"  MLP forward, batch 32: {_median_ms(mlp):8.3f} ms   (softmax rows sum to 1: {ok})")

    n = 1024
    a, b = pf.randn(n, n), pf.randn(n, n)
    ms = _median_ms(lambda: a @ b)
    print(f"  matmul {n}x{n} fp32:  {ms:8.3f} ms   ({2 * n**3 / ms / 1e6:.1f} GFLOP/s)")

    big = pf.randn(4 * 2**20)
    ms = _median_ms(lambda: pf.gelu(big))
    print(f"  gelu on 4M floats:    {ms:8.3f} ms   ({2 * big.numel() * 4 / ms / 1e6:.1f} GB/s)")
    ms = _median_ms(lambda: pf.sum(big))
    print(f"  sum of 4M floats:     {ms:8.3f} ms   ({big.numel() * 4 / ms / 1e6:.1f} GB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
