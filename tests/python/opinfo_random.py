"""OpInfos of the random ops (rand, randn, randint) and of the draws shaped by
tensors (bernoulli, normal: composites of rand and randn).

The reference is an independent NumPy implementation of the draws PyFlame
promises (Philox4x32-10, element i from counter offset + i; see
src/kernels/random.h): every device must give exactly these numbers for a
generator's state, which is how one seed gives the same tensors on the CPU and
on the GPU. Each sample passes a fresh pf.Generator; the harness calls the
reference first, so it reads the generator's state before PyFlame draws."""

import numpy as np
import torch

import pyflame as pf
from op_registry import ALL_DTYPES, FLOAT_DTYPES, PF_DTYPE, TORCH_DTYPE, Arg, OpInfo, Sample, make_values, pf_dtype_name

_M32 = np.uint64(0xFFFFFFFF)


def philox4x32(seed, counters):
    """The four 32-bit words of Philox4x32-10 for each counter (uint64 array)."""
    c0, c1 = counters & _M32, counters >> np.uint64(32)
    c2 = np.zeros_like(counters)
    c3 = np.zeros_like(counters)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _M32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _M32
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & _M32, (k1 + np.uint64(0xBB67AE85)) & _M32
    return c0, c1, c2, c3


def _uniform_double(hi, lo):
    bits = ((hi << np.uint64(21)) ^ (lo >> np.uint64(11))) & np.uint64((1 << 53) - 1)
    return bits.astype(np.float64) * 2.0**-53


def generator_state(g):
    """(seed, offset) of a pf.Generator."""
    state = np.frombuffer(bytes(g.get_state().detach().numpy()), dtype="<u8")
    return int(state[0]), int(state[1])


def draws(op, shape, dtype, g, low, high):
    """What pf.<op>(shape, dtype, generator=g) must return, as a torch tensor."""
    seed, offset = generator_state(g)
    n = int(np.prod(shape, dtype=np.int64))
    w0, w1, w2, w3 = philox4x32(seed, np.arange(offset, offset + n, dtype=np.uint64))
    if op == "randint":
        bits = (w0 << np.uint64(32)) | w1
        v = np.int64(low) + (bits % np.uint64(high - low)).astype(np.int64)
        return torch.from_numpy(v.reshape(shape)).to(TORCH_DTYPE[dtype])
    if op == "rand":
        u = {"float16": (w0 >> np.uint64(21)).astype(np.float64) / 2048,
             "bfloat16": (w0 >> np.uint64(24)).astype(np.float64) / 256,
             "float32": (w0 >> np.uint64(8)).astype(np.float64) * 2.0**-24}.get(dtype)
        v = low + (high - low) * (u if u is not None else _uniform_double(w0, w1))
    else:  # Box-Muller
        u1, u2 = _uniform_double(w0, w1), _uniform_double(w2, w3)
        v = low + high * np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(6.283185307179586 * u2)
    return torch.from_numpy(v.reshape(shape)).to(TORCH_DTYPE[dtype])


_SHAPES = {"plain": [(3, 5), (2, 3, 4), (1000,)], "empty": [(0,), (3, 0)], "size1": [(1,), (1, 1)],
           "scalar0d": [()]}
RANDOM_CLASSES = tuple(_SHAPES)


def _samples(op):
    def samples(rng, dtype, cls):
        out = []
        for shape in _SHAPES[cls]:
            g = pf.Generator().manual_seed(int(rng.integers(0, 2**63)))
            if rng.random() < 0.5:  # a generator that has drawn before: the offset matters
                pf.rand(7, generator=g)
            kwargs = dict(dtype=PF_DTYPE[dtype], generator=g)
            if op == "randint":
                low, high = {"bool": (0, 2), "uint8": (0, 200)}.get(dtype, (-50, 70))
                out.append(Sample((low, high, shape), kwargs))
            else:
                out.append(Sample(shape, kwargs))
        return out

    return samples


def _ref(op):
    def ref(*args, dtype, generator):
        if op == "randint":
            low, high, shape = args
        else:
            (low, high), shape = (0.0, 1.0), args
        return draws(op, tuple(shape), pf_dtype_name(dtype), generator, low, high)

    return ref


# ---- bernoulli, normal: their references draw from the generator's state when the sample was made
# (the placement test calls the reference after PyFlame has drawn).

_STATE_AT_SAMPLE = {}  # id(generator) -> (seed, offset)
_TENSOR_SHAPES = {"plain": [(3, 5), (2, 3, 4), (700,)], "noncontig": [(4, 6), (3, 2, 5)], "empty": [(0,), (3, 0)],
                  "scalar0d": [()]}
DRAW_CLASSES = tuple(_TENSOR_SHAPES)


def _fresh_generator(rng):
    g = pf.Generator().manual_seed(int(rng.integers(0, 2**63)))
    if rng.random() < 0.5:  # a generator that has drawn before: the offset matters
        pf.rand(5, generator=g)
    _STATE_AT_SAMPLE[id(g)] = generator_state(g)
    return g


def _draws_at_sample(op, shape, dtype, g, low=0.0, high=1.0):
    seed, offset = _STATE_AT_SAMPLE[id(g)]
    replay = pf.Generator()
    replay.set_state(pf.tensor(np.frombuffer(np.array([seed, offset], dtype="<u8").tobytes(), dtype=np.uint8)))
    return draws(op, shape, dtype, replay, low, high)


def _bernoulli_samples(rng, dtype, cls):
    out = []
    for shape in _TENSOR_SHAPES[cls]:
        layout = "T" if cls == "noncontig" else "contig"
        probs = make_values(rng, shape, dtype, low=0.0, high=1.0)
        out.append(Sample((Arg(probs, layout),), {"generator": _fresh_generator(rng)}))
        p = float(rng.choice([0.0, 0.3, 1.0]))
        out.append(Sample((Arg(make_values(rng, shape, dtype), layout),), {"p": p, "generator": _fresh_generator(rng)}))
    return out


def _bernoulli_ref(input, p=None, *, generator):
    uniform = "float64" if input.dtype == torch.float64 else "float32"
    u = _draws_at_sample("rand", tuple(input.shape), uniform, generator)
    return (u < (input if p is None else p)).to(input.dtype)


def _normal_samples(rng, dtype, cls):
    out = []
    for shape in _TENSOR_SHAPES[cls]:
        layout = "T" if cls == "noncontig" else "contig"
        mean, std = make_values(rng, shape, dtype), make_values(rng, shape, dtype, low=0.1, high=3.0)
        for args in ((Arg(mean, layout), Arg(std, layout)), (Arg(mean, layout), 2.5), (-1.5, Arg(std, layout))):
            out.append(Sample(args, {"generator": _fresh_generator(rng)}))
        if cls != "noncontig":  # (no tensor to lay out)
            out.append(Sample((0.5, 2.0, shape), {"dtype": PF_DTYPE[dtype], "generator": _fresh_generator(rng)}))
    if cls == "plain":  # mean and std broadcast together; the result has mean's dtype
        mean, std = make_values(rng, (3, 1), dtype), make_values(rng, (4,), "float64", low=0.1, high=3.0)
        out.append(Sample((Arg(mean), Arg(std, dtype="float64")), {"generator": _fresh_generator(rng)}))
    return out


def _normal_ref(mean, std=1.0, size=None, *, generator, dtype=None):
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    shape = tuple(torch.broadcast_shapes(*[t.shape for t in tensors])) if tensors else tuple(size)
    out_dtype = tensors[0].dtype if tensors else TORCH_DTYPE[pf_dtype_name(dtype)]
    z = _draws_at_sample("randn", shape, "float64", generator)
    as64 = [t.to(torch.float64) if isinstance(t, torch.Tensor) else t for t in (mean, std)]
    return (as64[0] + as64[1] * z).to(out_dtype)


OP_INFOS = [
    OpInfo("rand", "RANDOM", FLOAT_DTYPES, _samples("rand"), _ref("rand"), RANDOM_CLASSES, exact_float=True,
           method=False),
    # The CPU's and NumPy's double log and cos may differ in the last bit.
    OpInfo("randn", "RANDOM", FLOAT_DTYPES, _samples("randn"), _ref("randn"), RANDOM_CLASSES, method=False,
           tol={"float32": (1e-6, 1e-7), "float64": (1e-14, 1e-14)}),
    OpInfo("randint", "RANDOM", ALL_DTYPES, _samples("randint"), _ref("randint"), RANDOM_CLASSES, exact_float=True,
           method=False),
    OpInfo("bernoulli", "CUSTOM", FLOAT_DTYPES, _bernoulli_samples, _bernoulli_ref, DRAW_CLASSES, exact_float=True,
           method=False),  # (a method that draws again cannot equal the function's draws)
    OpInfo("normal", "CUSTOM", FLOAT_DTYPES, _normal_samples, _normal_ref, DRAW_CLASSES, method=False),
]
