"""Evaluates the idiom corpus with PyTorch and with PyFlame and compares the results.

    python tests/idioms/run_idioms.py [--json report.json] [--category NAME] [-q]

The same expression text is evaluated twice: with `torch`, `F`, `nn` bound to PyTorch,
then bound to `pyflame`, `pyflame.nn.functional` and `pyflame.nn` (only the names
change; no call is translated, so a missing or different API shows up as a
disagreement). Every expression gets fresh inputs built from the same NumPy data and a
freshly seeded generator. PyFlame runs in a child process so that a crash costs one
idiom, not the run.

Agreement: tensors with equal shape, dtype name and values (dtype-appropriate
tolerances, NaN equal to NaN); sequences elementwise; Python scalars, strings, dtypes
and devices by equality (strings with "torch." written as "pyflame."); both raising
(any exception type). Random idioms ("rand:" in the corpus) compare shapes and dtypes
only. Exits 0 whatever the rate: thresholds are asserted by tests/python/test_idioms.py.
"""

import argparse
import collections
import json
import math
import multiprocessing
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

# Tolerances (rtol, atol) by result dtype; integer and bool results must be exact.
TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-9),
}
PY_FLOAT_TOL = (1e-5, 1e-6)


def make_data():
    """The named inputs, as NumPy arrays; both libraries get tensors of the same data."""
    rng = np.random.default_rng(20240613)
    f32 = np.float32

    def normal(*shape):
        return rng.standard_normal(shape).round(3).astype(f32)

    x = normal(3, 4)
    xn = x.copy()
    xn[0, 1] = np.nan
    xn[2, 3] = np.nan
    return {
        "x": x,
        "y": normal(3, 4),
        "v": normal(4),
        "m": normal(4, 5),
        "b": normal(2, 3, 4),
        "i": np.array([[3, -1, 0, 5], [-2, 4, 1, -3], [2, -4, 6, -5]], dtype=np.int64),
        "idx": np.array([2, 0, 1], dtype=np.int64),
        "mask": np.array([[1, 0, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]], dtype=bool),
        "s": np.array(2.5, dtype=f32),
        "img": normal(2, 3, 8, 8),
        "seq": normal(2, 5, 8),
        "labels": np.array([1, 0, 3], dtype=np.int64),
        "p": (np.abs(x) + 0.5).astype(f32),
        "prob": rng.uniform(0.05, 0.95, (3, 4)).round(3).astype(f32),
        "tgt": np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=f32),
        "xd": x.astype(np.float64),
        "xn": xn,
    }


def setitem(t, index, value):
    t[index] = value
    return t


class _Missing:
    """Stands for a submodule the library lacks: any use raises AttributeError."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise AttributeError(f"{self._name} has no attribute {attr!r} (module missing)")


class Library:
    """The names an idiom sees for one library, plus how to recognise its objects."""

    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch

            self.mod = torch
            self.F = torch.nn.functional
            self.nn = torch.nn
        else:
            import pyflame

            self.mod = pyflame
            nn = getattr(pyflame, "nn", None)
            self.nn = nn if nn is not None else _Missing("pyflame.nn")
            F = getattr(nn, "functional", None) if nn is not None else None
            self.F = F if F is not None else _Missing("pyflame.nn.functional")
        self.tensor_type = self.mod.Tensor
        self.dtype_type = type(self.mod.float32)
        self.data = make_data()

    def seed(self):
        self.mod.manual_seed(0)

    def fixed(self, module):
        """Sets every parameter to deterministic values (in registration order)."""
        lib = self.mod
        with lib.no_grad():
            for k, prm in enumerate(module.parameters()):
                shape = tuple(prm.shape)
                n = int(np.prod(shape)) if shape else 1
                vals = (np.linspace(-0.5, 0.5, n) * (1 + 0.1 * k)).reshape(shape).astype(np.float32)
                prm.copy_(lib.tensor(vals).to(prm.dtype))
        return module

    def namespace(self):
        ns = {
            "torch": self.mod,
            "F": self.F,
            "nn": self.nn,
            "np": np,
            "math": math,
            "setitem": setitem,
            "fixed": self.fixed,
        }
        for key, arr in self.data.items():
            ns[key] = self.mod.tensor(arr.copy())
        return ns

    def evaluate(self, expr):
        """Canonical form of the expression's value, or of the exception it raises."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.seed()
                ns = self.namespace()
                value = eval(compile(expr, "<idiom>", "eval"), ns)
            except BaseException as e:  # noqa: BLE001 -- an idiom may raise anything
                if isinstance(e, KeyboardInterrupt):
                    raise
                return ("raise", type(e).__name__, str(e).splitlines()[0][:160] if str(e) else "")
            try:
                return self.canon(value)
            except Exception as e:  # noqa: BLE001
                return ("unreadable", type(value).__name__, f"{type(e).__name__}: {e}"[:160])

    def canon(self, r, depth=0):
        if depth > 6:
            return ("obj", type(r).__name__)
        if isinstance(r, self.tensor_type):
            return self.canon_tensor(r)
        if isinstance(r, self.dtype_type):
            return ("dtype", dtype_name(r))
        if isinstance(r, bool):
            return ("bool", r)
        if isinstance(r, int):
            return ("int", r)
        if isinstance(r, float):
            return ("float", r)
        if isinstance(r, str):
            return ("str", r.replace("torch.", "pyflame.") if self.name == "torch" else r)
        if r is None:
            return ("none",)
        if isinstance(r, np.ndarray) or isinstance(r, np.generic):
            a = np.asarray(r)
            return ("ndarray", str(a.dtype), tuple(a.shape), a.copy())
        if isinstance(r, (tuple, list)):
            return ("seq", [self.canon(e, depth + 1) for e in r])
        if type(r).__name__ == "device":
            return ("device", str(r))
        return ("obj", type(r).__name__)

    def canon_tensor(self, t):
        dt = dtype_name(t.dtype)
        shape = tuple(int(d) for d in t.shape)
        t = t.detach().cpu()
        if dt == "bfloat16":  # NumPy has no bfloat16
            t = t.float()
        try:
            a = np.asarray(t.numpy())
        except Exception:  # noqa: BLE001 -- fall back to the slower, more basic path
            a = np.asarray(t.tolist())
        return ("tensor", dt, shape, a.reshape(shape).copy())


def dtype_name(dt):
    return str(dt).rsplit(".", 1)[-1]


def _close(a, b, dt):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == bool or b.dtype == bool or dt not in TOLERANCES:
        if a.dtype.kind == "f" or b.dtype.kind == "f":  # e.g. complex or unknown float kinds
            return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
        return bool(np.array_equal(a, b))
    rtol, atol = TOLERANCES[dt]
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True))


def compare(ref, got, values=True):
    """(agree, reason) for two canonical results."""
    kr, kg = ref[0], got[0]
    if kr == "raise" or kg == "raise":
        if kr == kg:
            return True, ""
        return False, "PyTorch raises, PyFlame does not" if kr == "raise" else "PyFlame raises, PyTorch does not"
    if kr != kg:
        return False, f"kind {kr} vs {kg}"
    if kr == "tensor" or kr == "ndarray":
        _, dr, sr, ar = ref
        _, dg, sg, ag = got
        if sr != sg:
            return False, f"shape {sr} vs {sg}"
        if dr != dg:
            return False, f"dtype {dr} vs {dg}"
        if values and not _close(ar, ag, dr):
            return False, "values differ"
        return True, ""
    if kr == "seq":
        if len(ref[1]) != len(got[1]):
            return False, f"length {len(ref[1])} vs {len(got[1])}"
        for k, (a, b) in enumerate(zip(ref[1], got[1])):
            ok, why = compare(a, b, values)
            if not ok:
                return False, f"[{k}] {why}"
        return True, ""
    if kr == "float":
        if not values:
            return True, ""
        a, b = ref[1], got[1]
        if math.isnan(a) and math.isnan(b):
            return True, ""
        rtol, atol = PY_FLOAT_TOL
        return (math.isclose(a, b, rel_tol=rtol, abs_tol=atol) or a == b), "values differ"
    if kr in ("int", "bool") and not values:
        return True, ""
    return ref == got, "values differ"


def summarize(c):
    """One-line text of a canonical result."""
    k = c[0]
    if k == "tensor" or k == "ndarray":
        _, dt, shape, a = c
        flat = np.asarray(a).reshape(-1)
        body = np.array2string(flat[:6], precision=4, separator=",", threshold=10)
        more = "..." if flat.size > 6 else ""
        return f"{k}({dt}, {list(shape)}, {body}{more})"
    if k == "raise":
        return f"raise {c[1]}: {c[2]}"
    if k == "seq":
        inner = ", ".join(summarize(e) for e in c[1][:4])
        return f"[{inner}{', ...' if len(c[1]) > 4 else ''}]"
    if k == "str":
        return repr(c[1][:120])
    return f"{k} {c[1:]!r}"[:160]


# --- PyFlame in a child process -------------------------------------------------------

def _worker(conn):
    lib = Library("pyflame")
    while True:
        expr = conn.recv()
        if expr is None:
            return
        conn.send(lib.evaluate(expr))


class PyflameEvaluator:
    def __init__(self):
        self.ctx = multiprocessing.get_context("spawn")
        self.proc = None

    def _start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def evaluate(self, expr):
        if self.proc is None:
            self._start()
        try:
            self.conn.send(expr)
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.proc = None
            return ("crash", f"PyFlame process died (exit code {code})")

    def close(self):
        if self.proc is not None:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(10)


# --- driver ---------------------------------------------------------------------------

def run(categories=None):
    """Report dict for the corpus (optionally only some categories)."""
    items = [it for it in corpus.idioms() if not categories or it[0] in categories]
    torch_lib = Library("torch")
    flame = PyflameEvaluator()
    rows = []
    try:
        for category, expr, rand in items:
            ref = torch_lib.evaluate(expr)
            got = flame.evaluate(expr)
            ok, why = compare(ref, got, values=not rand)
            rows.append({
                "category": category,
                "expr": expr,
                "random": rand,
                "agree": ok,
                "reason": why,
                "torch": summarize(ref),
                "pyflame": summarize(got),
                "torch_raises": ref[0] == "raise",
            })
    finally:
        flame.close()
    agree = sum(r["agree"] for r in rows)
    by_cat = collections.OrderedDict()
    for r in rows:
        c = by_cat.setdefault(r["category"], {"total": 0, "agree": 0})
        c["total"] += 1
        c["agree"] += r["agree"]
    return {
        "total": len(rows),
        "agree": agree,
        "disagree": len(rows) - agree,
        "rate": agree / len(rows) if rows else 0.0,
        "error_cases": sum(r["torch_raises"] for r in rows),
        "random_cases": sum(r["random"] for r in rows),
        "by_category": by_cat,
        "disagreements": [r for r in rows if not r["agree"]],
        "results": rows,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the full report to this path")
    ap.add_argument("--category", action="append", help="only this category (repeatable)")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not list disagreements")
    args = ap.parse_args(argv)
    report = run(args.category)
    if not args.quiet:
        for r in report["disagreements"]:
            print(f"DIFF [{r['category']}] {r['expr']}  ::  {r['reason']}  ::  "
                  f"torch: {r['torch']}  ::  pyflame: {r['pyflame']}")
        print()
    for cat, c in report["by_category"].items():
        print(f"{cat:20s} {c['agree']:4d}/{c['total']:<4d} ({c['agree'] / c['total']:.1%})")
    print(f"\nagreement: {report['agree']}/{report['total']} = {report['rate']:.4f} "
          f"({report['disagree']} disagreements; {report['error_cases']} error cases, "
          f"{report['random_cases']} random idioms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
