"""PyFlame in a page: tensors, views, ops, and the spec's device API."""

import numpy as np

import pyflame as pf

print("ROCm available:", pf.rocm_is_available(), "| devices:", pf.rocm_device_count())
if pf.rocm_is_available():
    pf.set_device("rocm")
print("running on", pf.get_device(), pf.device_info())

pf.manual_seed(0)
x = pf.randn(4, 8)
w = pf.randn(8, 3)
b = pf.tensor([0.1, -0.2, 0.3])

logits = x @ w + b                     # matmul and broadcasting
probs = pf.softmax(logits, dim=-1)
print("probabilities:\n", probs)
print("rows sum to one:", np.allclose(pf.sum(probs, dim=1).numpy(), 1.0, atol=1e-6))
print("predicted classes:", pf.argmax(probs, dim=1).tolist())

# Views share memory; .numpy() of a CPU tensor is zero-copy.
t = pf.arange(12).reshape(3, 4)
print("t[1:, ::2] =", t[1:, ::2].tolist())
t[0, :] = -1
print("after t[0, :] = -1:", t.numpy()[0])

# Type promotion as in PyTorch.
print("int32 + 2.5 ->", (pf.ones(2, dtype=pf.int32) + 2.5).dtype)
print("float16 * 3 ->", (pf.ones(2, dtype=pf.float16) * 3).dtype)
