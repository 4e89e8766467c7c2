"""pyflame.distributed through real processes started by the launcher: every collective
and ReduceOp, groups, async handles, DistributedDataParallel against one process, and the
errors (before init, a peer that disagrees or dies). gloo on the CPU (CI); NCCL on two
GPUs (the GPU machine). Each launch runs distributed_worker.py's checks and reads the
result every rank wrote."""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import pyflame as pf
import pyflame.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


def _launch(args, cwd, timeout=240):
    return subprocess.run([sys.executable, "-m", "pyflame.distributed.run", "--standalone", "--nproc-per-node", "2",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _backend_skip(backend):
    if backend == "gloo" and not dist.is_gloo_available():
        pytest.skip("this build has no gloo backend (it is built where Debian's libgloo-dev is installed)")
    if backend == "nccl":
        if not pf.rocm_is_available() or pf.cuda.device_count() < 2:
            pytest.skip("the NCCL checks need two GPUs")
        if not dist.is_nccl_available():
            pytest.skip("NCCL is not available in this build or machine")


@pytest.fixture(scope="module", params=["gloo", "nccl"])
def worker_results(request, tmp_path_factory):
    backend = request.param
    _backend_skip(backend)
    out = tmp_path_factory.mktemp(backend)
    run = _launch([os.path.join(HERE, "distributed_worker.py"), backend, str(out)], cwd=out)
    assert run.returncode == 0, f"the ranks failed:\n{run.stdout}\n{run.stderr}"
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    return backend, results


CHECKS = ["error_before_init", "all_reduce", "avg_rejects_integers", "broadcast_from_rank_1", "all_gather",
          "reduce_scatter", "send_recv", "async_handles", "large", "objects", "groups", "wrong_device",
          "ddp_equals_one_process", "ddp_no_sync", "ddp_unused_parameter_raises", "ddp_broadcasts_buffers"]


@pytest.mark.parametrize("check", CHECKS)
def test_collectives_on_two_ranks(worker_results, check):
    backend, results = worker_results
    for rank, result in enumerate(results):
        assert result.get(check) == "ok", f"{backend} rank {rank}, {check}:\n{result.get(check)}"


def _script(tmp_path, body, backend="gloo"):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(f"""
        import datetime, os, sys, time
        import pyflame as pf
        import pyflame.distributed as dist
        rank = int(os.environ["RANK"])
        device = "rocm:" + os.environ["LOCAL_RANK"] if "{backend}" == "nccl" else "cpu"
        dist.init_process_group("{backend}", timeout=datetime.timedelta(seconds=5))
    """) + textwrap.dedent(body))
    return str(path)


def test_mismatched_sizes_raise_not_hang(tmp_path):
    # gloo only: NCCL cannot compare sizes across ranks (docs/distributed.md), so a mismatch
    # there either hangs (then the watchdog below ends it) or is the caller's to avoid.
    _backend_skip("gloo")
    script = _script(tmp_path, """
        t = pf.ones(10 if rank == 0 else 20)
        try:
            dist.all_reduce(t)
        except dist.DistBackendError as e:
            assert "all_reduce" in str(e), e
            print("raised", rank)
    """)
    start = time.monotonic()
    run = _launch([script], tmp_path, timeout=60)
    assert time.monotonic() - start < 40
    assert "raised" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_a_dead_peer_raises_naming_the_collective(tmp_path, backend):
    # Both ranks join (NCCL's communicator exists), then rank 1 dies. gloo notices at once;
    # on NCCL the collective runs on the GPU after the host returned, so the watchdog aborts
    # it after the timeout, the device wait ends, and the next call raises.
    _backend_skip(backend)
    script = _script(tmp_path, """
        t = pf.ones(1000, device=device)
        dist.all_reduce(t)
        assert t.tolist() == [2.0] * 1000
        if rank == 1:
            os._exit(0)  # gone without a word, as a crashed rank
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            if device != "cpu":
                pf.cuda.synchronize(device)
            dist.all_reduce(t)
        except dist.DistBackendError as e:
            assert "all_reduce" in str(e), e
            assert time.monotonic() - start < 30, time.monotonic() - start
            print("raised")
    """, backend)
    run = _launch([script], tmp_path, timeout=90)
    assert run.returncode == 0 and "raised" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_two_nodes_meet_through_the_master(tmp_path, backend):
    # Two launchers, as on two machines (--nnodes 2, one node rank each) on this host; for
    # NCCL each "node" sees one GPU of its own, as separate machines would.
    _backend_skip(backend)
    script = _script(tmp_path, """
        t = pf.tensor([float(rank + 1)] * 3, device=device)
        dist.all_reduce(t)
        print("sum", t.tolist(), "of", dist.get_world_size())
    """, backend)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = []
    for node in range(2):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(node)) if backend == "nccl" else None
        nodes.append(subprocess.Popen([sys.executable, "-m", "pyflame.distributed.run", "--nnodes", "2",
                                       "--node-rank", str(node), "--nproc-per-node", "1", "--master-addr",
                                       "127.0.0.1", "--master-port", str(port), script], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in nodes:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "sum [3.0, 3.0, 3.0] of 2" in out, out + err


def test_errors_without_a_process_group():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistError, match="init_process_group"):
        dist.all_reduce(pf.ones(2))
    with pytest.raises(dist.DistError, match="init_process_group"):
        dist.get_rank()
    assert issubclass(dist.DistBackendError, RuntimeError) and issubclass(dist.DistStoreError, dist.DistError)
    assert not dist.is_mpi_available()
    with pytest.raises(pf.NotSupportedError, match="mpi"):
        dist.init_process_group("mpi", rank=0, world_size=1)
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("cpu:nccl2", rank=0, world_size=1)


def test_single_process_group_over_tcp(tmp_path):
    _backend_skip("gloo")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    try:
        t = pf.arange(5.0)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert dist.get_world_size() == 1 and dist.get_backend() == "gloo"
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_a_given_store_stays_the_callers():
    _backend_skip("gloo")
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        t = pf.ones(3)
        dist.broadcast(t, src=0)
        assert t.tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()
    store.set("still", b"open")
    assert store.get("still") == b"open"
    store.close()
