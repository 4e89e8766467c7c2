"""Launch one process per rank, as torchrun: ``python -m pyflame.distributed.run [options] script.py args...``.

    python -m pyflame.distributed.run --nproc-per-node 2 train.py --epochs 3
    python -m pyflame.distributed.run --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 -m my.module

Why the torchrun shape: scripts written for torchrun read the same environment variables
(MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK) and
call ``init_process_group("env://")``-style setup unchanged; the flags take both torchrun
spellings (``--nproc-per-node`` and ``--nproc_per_node``). As torchrun, it sets
OMP_NUM_THREADS=1 for more than one process per node when unset, runs children as
``python -u``, and starts each child in its own session so that terminating a rank signals its
whole process group (DataLoader workers and other grandchildren included).

What differs: no elastic agent. There are no restarts (a failing rank ends the job), no
rendezvous backends other than the static env:// one (every node gets --nnodes, --node-rank,
--master-addr and --master-port; --standalone only picks a free local port), no
--redirects/--tee/log directories (children share the launcher's stdout and stderr), and
TORCHELASTIC_*/ROLE_* variables are not set.

Failure handling: the first rank found exited non-zero makes the launcher terminate the others
(SIGTERM to each rank's process group, SIGKILL after a grace period), report the rank on
stderr and exit with its exit code (128 + N for a rank killed by signal N). SIGINT, SIGTERM and
SIGHUP received by the launcher are forwarded to the ranks the same way before it exits with
128 + the signal. On Linux each child also gets SIGKILL should the launcher itself die
(PR_SET_PDEATHSIG), so no rank outlives it.

The launcher's own code uses only the standard library and starts no GPU work; being a module
of the package, it is imported after `pyflame` itself (about half a second).
"""

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

__all__ = ["main"]

_POLL_S = 0.1
_GRACE_S = 5.0
_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1
_PROG = "pyflame.distributed.run"


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=f"python -m {_PROG}",
        description="Start --nproc-per-node processes of a script with torchrun's environment variables.",
    )
    parser.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc_per_node", type=int, default=1,
                        help="processes to start on this node (default 1)")
    parser.add_argument("--nnodes", type=int, default=1, help="number of nodes (default 1)")
    parser.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0,
                        help="rank of this node, in [0, nnodes) (default 0)")
    parser.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1",
                        help="address of the rank 0 node (default 127.0.0.1)")
    parser.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=29500,
                        help="free port on the rank 0 node (default 29500)")
    parser.add_argument("--standalone", action="store_true",
                        help="single node on 127.0.0.1 with a free port; overrides --nnodes, --node-rank, "
                             "--master-addr and --master-port")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run training_script as a module, as 'python -m'")
    parser.add_argument("training_script", help="the script (or, with -m, the module) each rank runs")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER, help="arguments passed to it")
    args = parser.parse_args(argv)

    if args.standalone:
        args.nnodes, args.node_rank, args.master_addr = 1, 0, "127.0.0.1"
        args.master_port = _free_port(args.master_addr)
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be at least 1, got {args.nproc_per_node}")
    if args.nnodes < 1:
        parser.error(f"--nnodes must be at least 1, got {args.nnodes}")
    if not 0 <= args.node_rank < args.nnodes:
        parser.error(f"--node-rank must be in [0, {args.nnodes - 1}], got {args.node_rank}")
    if not 0 < args.master_port < 65536:
        parser.error(f"--master-port must be in [1, 65535], got {args.master_port}")
    return args


def _free_port(addr):
    # The port is free now but not reserved; rank 0 binds it moments later, as torch's
    # standalone rendezvous also accepts.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _die_with_launcher():
    """A preexec_fn that makes the child get SIGKILL when the launcher dies, even by SIGKILL;
    None where prctl does not exist (not Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    launcher_pid = os.getpid()

    def set_death_signal():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The launcher may have died between fork and prctl; then no signal would ever come.
        if os.getppid() != launcher_pid:
            os._exit(1)

    return set_death_signal


def _signal_group(proc, signum):
    # Each child leads its own process group (start_new_session), so killpg reaches its
    # grandchildren too. The pgid stays reserved while any member lives, so signalling the group
    # of an already reaped rank hits only its leftovers, never an unrelated process.
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):  # EPERM: macOS, for a group left with a zombie only
        pass


def _shutdown(procs, signum):
    """Send signum to every rank, give them _GRACE_S to exit, SIGKILL what is left and reap all."""
    for p in procs:
        _signal_group(p, signum)
    deadline = time.monotonic() + _GRACE_S
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    for p in procs:
        _signal_group(p, signal.SIGKILL)
    for p in procs:
        p.wait()


def _exit_code(returncode):
    """A process exit status for a child's returncode: 128 + N for death by signal N, as shells."""
    return 128 - returncode if returncode < 0 else returncode


def _describe(returncode):
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def main(argv=None):
    """Run the launcher with command-line arguments argv (default sys.argv[1:]); returns the exit code."""
    args = _parse_args(argv)
    nproc = args.nproc_per_node
    world_size = args.nnodes * nproc

    base_env = dict(os.environ)
    if nproc > 1 and "OMP_NUM_THREADS" not in base_env:
        print(f"{_PROG}: setting OMP_NUM_THREADS=1 for each process to avoid overloading the system; "
              "set it yourself to tune it.", file=sys.stderr)
        base_env["OMP_NUM_THREADS"] = "1"
    base_env.update(
        MASTER_ADDR=args.master_addr,
        MASTER_PORT=str(args.master_port),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=str(args.node_rank),
    )
    cmd = [sys.executable, "-u"] + (["-m"] if args.module else []) + [args.training_script]
    cmd += args.training_script_args

    # Signals only set a flag: raising from the handler could interrupt Popen halfway and lose
    # track of a started child. The loop below notices the flag within _POLL_S.
    received = []
    previous_handlers = {s: signal.signal(s, lambda signum, frame: received.append(signum))
                         for s in _FORWARDED_SIGNALS}
    procs = []
    try:
        preexec_fn = _die_with_launcher()
        for local_rank in range(nproc):
            env = dict(base_env, RANK=str(args.node_rank * nproc + local_rank), LOCAL_RANK=str(local_rank))
            procs.append(subprocess.Popen(cmd, env=env, start_new_session=True,
                                          preexec_fn=preexec_fn))

        while True:
            if received:
                signum = received[0]
                print(f"{_PROG}: received {signal.Signals(signum).name}, forwarding it to all ranks",
                      file=sys.stderr)
                _shutdown(procs, signum)
                return 128 + signum
            codes = [p.poll() for p in procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                local_rank = failed[0]
                code = codes[local_rank]
                rank = args.node_rank * nproc + local_rank
                print(f"{_PROG}: rank {rank} (local_rank {local_rank}, pid {procs[local_rank].pid}) "
                      f"{_describe(code)}; terminating the other ranks", file=sys.stderr)
                _shutdown(procs, signal.SIGTERM)
                return _exit_code(code)
            if all(c == 0 for c in codes):
                return 0
            time.sleep(_POLL_S)
    finally:
        # Reached with live children only on an unexpected error (e.g. a failed Popen):
        # never leave ranks behind.
        if any(p.poll() is None for p in procs):
            _shutdown(procs, signal.SIGKILL)
        for s, handler in previous_handlers.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
