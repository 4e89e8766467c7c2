"""pyflame.distributed.run, the torchrun-style launcher: real processes started as a user would."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the launcher uses POSIX process groups")

ENV_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE", "GROUP_RANK",
            "OMP_NUM_THREADS"]

# Each rank dumps its environment and arguments to out_dir/rank<RANK>.json.
DUMP_SCRIPT = f"""
import json, os, sys
out_dir = os.path.dirname(os.path.abspath(__file__))
record = {{"env": {{k: os.environ.get(k) for k in {ENV_VARS!r}}}, "argv": sys.argv[1:]}}
with open(os.path.join(out_dir, "rank" + os.environ["RANK"] + ".json"), "w") as f:
    json.dump(record, f)
"""


def launch(*args, cwd, env=None, timeout=30):
    """Run the launcher with args; returns the CompletedProcess and the wall time it took."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pyflame.distributed.run", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def records(directory):
    """{rank: record} for the rank<N>.json files that DUMP_SCRIPT wrote."""
    out = {}
    for name in os.listdir(directory):
        if name.startswith("rank") and name.endswith(".json"):
            with open(directory / name) as f:
                out[int(name[4:-5])] = json.load(f)
    return out


def assert_gone(pid):
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def wait_for_files(paths, timeout=10):
    deadline = time.monotonic() + timeout
    while not all(p.exists() and p.read_text() for p in paths):
        assert time.monotonic() < deadline, f"ranks did not start: {paths}"
        time.sleep(0.05)


@pytest.fixture
def env_without_omp():
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    return env


@pytest.mark.parametrize("spelling", ["--nproc-per-node", "--nproc_per_node"])
def test_env_vars_single_node(tmp_path, env_without_omp, spelling):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    proc, _ = launch(spelling, 2, "dump.py", cwd=tmp_path, env=env_without_omp)
    assert proc.returncode == 0, proc.stderr
    got = records(tmp_path)
    assert sorted(got) == [0, 1]
    for rank, rec in got.items():
        assert rec["env"] == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "LOCAL_WORLD_SIZE": "2",
                              "GROUP_RANK": "0", "OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize("dash", ["-", "_"])
def test_env_vars_multi_node(tmp_path, env_without_omp, dash):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    env_without_omp["OMP_NUM_THREADS"] = "7"  # a user's setting is kept
    proc, _ = launch(f"--nproc{dash}per{dash}node", 2, "--nnodes", 2, f"--node{dash}rank", 1,
                     f"--master{dash}addr", "10.1.2.3", f"--master{dash}port", 1234, "dump.py",
                     cwd=tmp_path, env=env_without_omp)
    assert proc.returncode == 0, proc.stderr
    got = records(tmp_path)
    assert sorted(got) == [2, 3]
    for rank, rec in got.items():
        assert rec["env"] == {"RANK": str(rank), "LOCAL_RANK": str(rank - 2), "WORLD_SIZE": "4",
                              "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "1234", "LOCAL_WORLD_SIZE": "2",
                              "GROUP_RANK": "1", "OMP_NUM_THREADS": "7"}


def test_single_process_leaves_omp_unset(tmp_path, env_without_omp):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    proc, _ = launch("dump.py", cwd=tmp_path, env=env_without_omp)
    assert proc.returncode == 0, proc.stderr
    assert records(tmp_path)[0]["env"]["OMP_NUM_THREADS"] is None
    assert records(tmp_path)[0]["env"]["WORLD_SIZE"] == "1"


def test_standalone_picks_a_free_port(tmp_path):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    proc, _ = launch("--standalone", "--nproc-per-node", 2, "dump.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ports = {rec["env"]["MASTER_PORT"] for rec in records(tmp_path).values()}
    assert len(ports) == 1 and ports != {"29500"}


def test_script_arguments_pass_through(tmp_path):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    args = ["--epochs", "3", "-m", "x y", "--nproc-per-node", "5"]
    proc, _ = launch("--nproc-per-node", 2, "dump.py", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = records(tmp_path)
    assert sorted(got) == [0, 1]  # the script's --nproc-per-node is its own, not the launcher's
    assert all(rec["argv"] == args for rec in got.values())


def test_module_form(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dump.py").write_text(DUMP_SCRIPT)
    proc, _ = launch("--nproc-per-node", 2, "-m", "mypkg.dump", "a", "--b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = records(pkg)
    assert sorted(got) == [0, 1]
    assert all(rec["argv"] == ["a", "--b"] for rec in got.values())


# Rank 0 records its pid and sleeps, noting a SIGTERM in the file "sigterm0" (or ignoring it);
# rank 1 fails once rank 0 is up, as given by FAIL.
FAILING_SCRIPT = """
import os, signal, sys, time
here = os.path.dirname(os.path.abspath(__file__))
pid_file = os.path.join(here, "pid0")

def on_sigterm(signum, frame):
    open(os.path.join(here, "sigterm0"), "w").close()
    sys.exit(0)

if os.environ["RANK"] == "0":
    signal.signal(signal.SIGTERM, signal.SIG_IGN if os.environ.get("IGNORE_SIGTERM") else on_sigterm)
    with open(pid_file + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(60)
    sys.exit(0)
while not os.path.exists(pid_file):
    time.sleep(0.01)
if os.environ["FAIL"] == "exit":
    sys.exit(3)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("fail, code, message", [("exit", 3, "exited with code 3"),
                                                 ("kill", 128 + 9, "killed by signal SIGKILL")])
def test_failing_rank_stops_the_others(tmp_path, fail, code, message):
    (tmp_path / "fail.py").write_text(FAILING_SCRIPT)
    proc, elapsed = launch("--nproc-per-node", 2, "fail.py", cwd=tmp_path, env=dict(os.environ, FAIL=fail))
    assert proc.returncode == code, proc.stderr
    assert elapsed < 10, "the launcher waited for the sleeping rank"
    assert "rank 1 (local_rank 1, pid " in proc.stderr and message in proc.stderr
    assert (tmp_path / "sigterm0").exists(), "rank 0 was not given a SIGTERM to shut down cleanly"
    assert_gone(int((tmp_path / "pid0").read_text()))


def test_rank_ignoring_sigterm_is_killed_after_grace(tmp_path, monkeypatch):
    # In-process so that the grace period can be shortened; main() returns instead of exiting.
    from pyflame.distributed import run

    monkeypatch.setattr(run, "_GRACE_S", 0.5)
    monkeypatch.setenv("FAIL", "exit")
    monkeypatch.setenv("IGNORE_SIGTERM", "1")
    (tmp_path / "fail.py").write_text(FAILING_SCRIPT)
    start = time.monotonic()
    assert run.main(["--nproc-per-node", "2", str(tmp_path / "fail.py")]) == 3
    assert time.monotonic() - start < 10
    assert_gone(int((tmp_path / "pid0").read_text()))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_is_forwarded_to_ranks(tmp_path, signum):
    script = tmp_path / "sleep.py"
    # Each rank records its pid, then the signal it gets, in the file pid<RANK>.
    script.write_text(textwrap.dedent("""
        import os, signal, sys, time
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pid" + os.environ["RANK"])

        def on_signal(signum, frame):
            with open(path, "a") as f:
                f.write(f" {signum}")
            sys.exit(0)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(60)
    """))
    launcher = subprocess.Popen([sys.executable, "-m", "pyflame.distributed.run", "--nproc-per-node", "2",
                                 str(script)], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        pid_files = [tmp_path / "pid0", tmp_path / "pid1"]
        wait_for_files(pid_files)
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=10)
    finally:
        launcher.kill()
        launcher.wait()
    assert launcher.returncode == 128 + signum, stderr
    assert f"received {signal.Signals(signum).name}" in stderr
    for p in pid_files:
        pid, received = p.read_text().split()
        assert int(received) == signum
        assert_gone(int(pid))


def test_bad_node_rank_is_a_usage_error(tmp_path):
    (tmp_path / "dump.py").write_text(DUMP_SCRIPT)
    proc, _ = launch("--nnodes", 2, "--node-rank", 2, "dump.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--node-rank must be in [0, 1]" in proc.stderr
    assert records(tmp_path) == {}
