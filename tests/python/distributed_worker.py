"""One rank of test_distributed.py's process groups, started by the launcher:

    python -m pyflame.distributed.run --nproc-per-node 2 distributed_worker.py BACKEND OUT_DIR [CHECK...]

BACKEND is 'gloo' (CPU tensors) or 'nccl' (rank r on GPU r). Each check compares with
NumPy on inputs every rank can rebuild (seeded by rank); the rank writes {check: 'ok' or
the error} to OUT_DIR/rank<R>.json, which the test reads. A failing check does not stop
the others, so one run reports them all.
"""

import datetime
import json
import os
import sys
import traceback

import numpy as np

import pyflame as pf
import pyflame.distributed as dist

BACKEND, OUT = sys.argv[1], sys.argv[2]
ONLY = set(sys.argv[3:])
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
DEVICE = f"rocm:{int(os.environ['LOCAL_RANK'])}" if BACKEND == "nccl" else "cpu"
FLOATS = ("float32", "bfloat16") if BACKEND == "nccl" else ("float32",)


def data(rank, n, dtype, salt=0):
    """Rank `rank`'s input: non-zero, distinct per rank, exact in every dtype used."""
    rng = np.random.default_rng(1000 * rank + salt)
    if dtype in ("int64", "int32"):
        return rng.integers(-5, 6, n).astype(dtype)
    values = rng.integers(-8, 9, n) / 4 + (rank + 1) / 8  # multiples of 1/8: exact in bf16 sums of 2
    return values.astype(np.float32)


def tensor(values, dtype):
    return pf.tensor(values, dtype=getattr(pf, dtype), device=DEVICE)


def numpy(t):
    return t.to(pf.float32).cpu().detach().numpy() if t.dtype == pf.bfloat16 else t.cpu().detach().numpy()


REDUCE = {
    dist.ReduceOp.SUM: lambda xs: np.sum(xs, axis=0),
    dist.ReduceOp.AVG: lambda xs: np.mean(xs, axis=0),
    dist.ReduceOp.PRODUCT: lambda xs: np.prod(xs, axis=0),
    dist.ReduceOp.MIN: lambda xs: np.min(xs, axis=0),
    dist.ReduceOp.MAX: lambda xs: np.max(xs, axis=0),
}


def check_all_reduce():
    for dtype in FLOATS + ("int64",):
        for op, ref in REDUCE.items():
            if op == dist.ReduceOp.AVG and dtype == "int64":
                continue
            t = tensor(data(RANK, 1001, dtype), dtype)
            assert dist.all_reduce(t, op=op) is None
            want = ref([data(r, 1001, dtype).astype(np.float64) for r in range(WORLD)])
            np.testing.assert_allclose(numpy(t), want, rtol=1e-6 if dtype != "bfloat16" else 1e-2,
                                       err_msg=f"{dtype} {op.name}")


def check_avg_rejects_integers():
    try:
        dist.all_reduce(tensor(data(RANK, 4, "int64"), "int64"), op=dist.ReduceOp.AVG)
    except TypeError as e:
        assert "AVG" in str(e)
    else:
        raise AssertionError("AVG of int64 did not raise")


def check_broadcast_from_rank_1():
    t = tensor(data(RANK, 257, "float32"), "float32")
    dist.broadcast(t, src=1)
    np.testing.assert_array_equal(numpy(t), data(1, 257, "float32"))


def check_all_gather():
    mine = tensor(data(RANK, 33, "float32").reshape(3, 11), "float32")
    out = [tensor(np.full((3, 11), -1.0, np.float32), "float32") for _ in range(WORLD)]
    dist.all_gather(out, mine)
    for r in range(WORLD):
        np.testing.assert_array_equal(numpy(out[r]), data(r, 33, "float32").reshape(3, 11))
    flat = tensor(np.full(33 * WORLD, -1.0, np.float32), "float32")
    dist.all_gather_into_tensor(flat, mine)
    np.testing.assert_array_equal(numpy(flat), np.concatenate([data(r, 33, "float32") for r in range(WORLD)]))


def check_reduce_scatter():
    n = 17
    mine = tensor(data(RANK, n * WORLD, "float32"), "float32")
    out = tensor(np.full(n, -1.0, np.float32), "float32")
    dist.reduce_scatter_tensor(out, mine, op=dist.ReduceOp.SUM)
    total = np.sum([data(r, n * WORLD, "float32") for r in range(WORLD)], axis=0)
    np.testing.assert_allclose(numpy(out), total[RANK * n:(RANK + 1) * n], rtol=1e-6)


def check_send_recv():
    peer = 1 - RANK
    out = tensor(data(RANK, 65, "float32"), "float32")
    into = tensor(np.full(65, -1.0, np.float32), "float32")
    for _ in range(2):  # twice: messages of one pair match in order
        if RANK == 0:
            dist.send(out, dst=peer)
            assert dist.recv(into, src=peer) == peer
        else:
            assert dist.recv(into, src=peer) == peer
            dist.send(out, dst=peer)
        np.testing.assert_array_equal(numpy(into), data(peer, 65, "float32"))


def check_async_handles():
    ts = [tensor(data(RANK, 100 + i, "float32", salt=i), "float32") for i in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, (t, w) in enumerate(zip(ts, works)):
        w.wait()
        want = np.sum([data(r, 100 + i, "float32", salt=i) for r in range(WORLD)], axis=0)
        np.testing.assert_allclose(numpy(t), want, rtol=1e-6)
        assert w.is_completed() or BACKEND == "nccl"


def check_large():
    n = 64 * 1024 * 1024
    t = pf.full((n,), float(RANK + 1), device=DEVICE)
    t[n - 1] = 0.5 * (RANK + 1)
    dist.all_reduce(t)
    s = WORLD * (WORLD + 1) / 2
    assert float(t[0]) == s and float(t[n // 2]) == s and float(t[n - 1]) == 0.5 * s, "64M-element all_reduce"


def check_objects():
    got = [None] * WORLD
    mine = {"rank": RANK, "text": "x" * (10 + 1000 * RANK)}  # lengths differ: padded on the way
    dist.all_gather_object(got, mine)
    assert got == [{"rank": r, "text": "x" * (10 + 1000 * r)} for r in range(WORLD)], got
    objects = [("from", RANK), None] if RANK == 1 else [None, None]
    dist.broadcast_object_list(objects, src=1)
    assert objects == [("from", 1), None], objects


def check_groups():
    solo = dist.new_group([0])
    both = dist.new_group([0, 1])
    if RANK == 0:
        assert dist.get_world_size(solo) == 1 and dist.get_rank(solo) == 0
        t = tensor(data(0, 8, "float32"), "float32")
        dist.all_reduce(t, group=solo)
        np.testing.assert_array_equal(numpy(t), data(0, 8, "float32"))
    else:
        assert solo is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(solo) == -1
    t = tensor(data(RANK, 8, "float32"), "float32")
    dist.all_reduce(t, group=both, op=dist.ReduceOp.MAX)
    np.testing.assert_array_equal(numpy(t), np.max([data(r, 8, "float32") for r in range(WORLD)], axis=0))


def check_wrong_device():
    other = pf.zeros(4) if BACKEND == "nccl" else None
    if other is None:
        return
    try:
        dist.all_reduce(other)
    except ValueError as e:
        assert "no backend for tensors on 'cpu'" in str(e)
    else:
        raise AssertionError("a CPU tensor in an nccl-only group did not raise")


def _model():
    pf.manual_seed(0)
    return pf.nn.Sequential(pf.nn.Linear(8, 16), pf.nn.ReLU(), pf.nn.Linear(16, 4)).to(DEVICE)


def _batch(step):
    rng = np.random.default_rng(step)
    return (tensor(rng.standard_normal((8, 8)).astype(np.float32), "float32"),
            tensor(rng.standard_normal((8, 4)).astype(np.float32), "float32"))


def check_ddp_equals_one_process():
    for make_opt in (lambda p: pf.optim.SGD(p, lr=0.1), lambda p: pf.optim.Adam(p, lr=0.01)):
        ref = _model()
        ref_opt = make_opt(ref.parameters())
        model = _model()
        if RANK == 1:  # rank 0's weights win at construction
            with pf.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
        ddp = pf.nn.parallel.DistributedDataParallel(model, device_ids=None, bucket_cap_mb=0.0005)
        assert len(ddp.reducer.buckets) > 1, "small buckets: several all-reduces overlap backward"
        opt = make_opt(ddp.parameters())
        for step in range(5):
            x, y = _batch(step)
            ref_opt.zero_grad()
            pf.nn.functional.mse_loss(ref(x), y).backward()
            ref_opt.step()
            half = slice(RANK * 4, RANK * 4 + 4)
            opt.zero_grad()
            pf.nn.functional.mse_loss(ddp(x[half]), y[half]).backward()
            opt.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(numpy(p), numpy(q), rtol=1e-4, atol=1e-5)


def check_ddp_no_sync():
    ref = _model()
    model = _model()
    ddp = pf.nn.parallel.DistributedDataParallel(model)
    x, y = _batch(7)
    for micro in range(2):  # every rank's two micro-batches, averaged over ranks
        for r in range(WORLD):
            rows = slice(r * 4 + micro * 2, r * 4 + micro * 2 + 2)
            (pf.nn.functional.mse_loss(ref(x[rows]), y[rows]) / WORLD).backward()
    rows = [slice(RANK * 4 + m * 2, RANK * 4 + m * 2 + 2) for m in range(2)]
    with ddp.no_sync():
        pf.nn.functional.mse_loss(ddp(x[rows[0]]), y[rows[0]]).backward()
    local = [numpy(p.grad).copy() for p in model.parameters()]
    pf.nn.functional.mse_loss(ddp(x[rows[1]]), y[rows[1]]).backward()
    for p, q, before in zip(model.parameters(), ref.parameters(), local):
        np.testing.assert_allclose(numpy(p.grad), numpy(q.grad), rtol=1e-4, atol=1e-6)
    assert any(not np.allclose(b, numpy(p.grad)) for b, p in zip(local, model.parameters()))


def check_ddp_unused_parameter_raises():
    model = pf.nn.ModuleDict({"used": pf.nn.Linear(4, 4), "unused": pf.nn.Linear(4, 4)}).to(DEVICE)
    ddp = pf.nn.parallel.DistributedDataParallel(model)
    x = tensor(data(RANK, 8, "float32").reshape(2, 4), "float32")
    try:
        ddp.module["used"](x).sum().backward()
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e)
    else:
        raise AssertionError("an unused parameter did not raise")
    ddp = pf.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    ddp.module["used"](x).sum().backward()
    w = model["used"].weight.grad  # averaged: the same on every rank
    both = [tensor(np.zeros((4, 4), np.float32), "float32") for _ in range(WORLD)]
    dist.all_gather(both, w)
    np.testing.assert_array_equal(numpy(both[0]), numpy(both[1]))


def check_ddp_broadcasts_buffers():
    model = pf.nn.Sequential(pf.nn.Linear(4, 4), pf.nn.BatchNorm1d(4)).to(DEVICE)
    with pf.no_grad():
        model[1].running_mean.fill_(float(RANK))  # differs per rank until DDP copies rank 0's
    ddp = pf.nn.parallel.DistributedDataParallel(model)
    assert numpy(model[1].running_mean).tolist() == [0.0] * 4
    ddp(tensor(data(RANK, 8, "float32").reshape(2, 4), "float32"))  # training: each rank's own statistics
    ddp.eval()
    with pf.no_grad():
        ddp(tensor(data(RANK, 8, "float32").reshape(2, 4), "float32"))  # rank 0's buffers, then no update
    both = [tensor(np.zeros(4, np.float32), "float32") for _ in range(WORLD)]
    dist.all_gather(both, model[1].running_mean)
    np.testing.assert_array_equal(numpy(both[0]), numpy(both[1]))


CHECKS = {name[len("check_"):]: f for name, f in globals().items() if name.startswith("check_")}


def main():
    if BACKEND == "nccl":
        pf.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    try:
        dist.all_reduce(pf.zeros(1))
    except dist.DistError as e:
        before_init = "init_process_group" in str(e)
    else:
        before_init = False
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    results = {"error_before_init": "ok" if before_init else "no DistError before init_process_group"}
    assert dist.is_initialized() and dist.get_rank() == RANK and dist.get_world_size() == WORLD
    for name, check in CHECKS.items():
        if ONLY and name not in ONLY:
            continue
        try:
            check()
            results[name] = "ok"
        except Exception:  # noqa: BLE001 (reported to the test, which fails on it)
            results[name] = traceback.format_exc()
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(OUT, f"rank{RANK}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
