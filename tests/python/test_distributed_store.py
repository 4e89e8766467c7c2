"""The rendezvous key-value store (pyflame.distributed.store): TCPStore and PrefixStore.

Clients run in threads and in real subprocesses. Every store gets a short timeout so a broken
store fails the test in seconds instead of hanging for the default 300 s.
"""

import contextlib
import datetime
import gc
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pyflame.distributed import store as store_module
from pyflame.distributed.store import DistTimeoutError, PrefixStore, TCPStore

SHORT = datetime.timedelta(seconds=3)
HOST = "127.0.0.1"


@pytest.fixture
def stores():
    """make(...) builds a TCPStore with a short timeout; all are closed after the test."""
    made = []

    def make(port=0, is_master=False, timeout=SHORT, **kw):
        s = TCPStore(HOST, port, is_master=is_master, timeout=timeout, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def master(stores):
    return stores(is_master=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _run_threads(fns, timeout=3.0):
    """Run callables in threads; re-raise the first exception, fail on a hang."""
    errors, results = [], [None] * len(fns)

    def wrap(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a store client thread hung"
    if errors:
        raise errors[0]
    return results


_CHILD_PRELUDE = textwrap.dedent(f"""
    import datetime, sys, time
    from pyflame.distributed import store as st
    port, rank = int(sys.argv[1]), int(sys.argv[2])
    store = st.TCPStore({HOST!r}, port, timeout=datetime.timedelta(seconds=3))
""")


def _spawn(body, port, rank):
    return subprocess.Popen([sys.executable, "-c", _CHILD_PRELUDE + textwrap.dedent(body),
                             str(port), str(rank)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _server_threads(port):
    return [t for t in threading.enumerate() if t.name == f"pyflame-store-{port}"]


# ---------------------------------------------------------------------------------------------


def test_set_get_between_threads(master, stores):
    assert master.port > 0 and master.host == HOST
    a, b = stores(master.port), stores(master.port)
    _run_threads([lambda: a.set("from_a", b"\x00\xffbytes"), lambda: b.set("from_b", "text")])
    assert master.get("from_a") == b"\x00\xffbytes"
    assert a.get("from_b") == b"text"  # str values are stored as UTF-8 bytes
    b.set("from_b", b"overwritten")
    assert master.get("from_b") == b"overwritten"


@contextlib.contextmanager
def _set_later(client, key, value, delay):
    timer = threading.Timer(delay, lambda: client.set(key, value))
    timer.start()
    try:
        yield
    finally:
        timer.join()


def test_get_blocks_until_a_later_set(master, stores):
    client = stores(master.port)
    start = time.monotonic()
    with _set_later(client, "late", b"value", 0.3):
        assert master.get("late") == b"value"
    assert time.monotonic() - start >= 0.25


def test_wait_blocks_until_all_keys_exist(master, stores):
    client = stores(master.port)
    client.set("k1", b"1")
    timer = threading.Timer(0.2, lambda: client.set("k2", b"2"))
    start = time.monotonic()
    timer.start()
    try:
        master.wait(["k1", "k2"], datetime.timedelta(seconds=2))
    finally:
        timer.join()
    assert time.monotonic() - start >= 0.15


def test_subprocess_clients_exchange_values_and_count(master):
    # Three real processes publish an "address", read each other's, and increment one counter
    # 100 times each while the master increments it too: 400 in all.
    body = """
        store.set(f"addr/{rank}", f"10.0.0.{rank}:{29500 + rank}")
        peers = [store.get(f"addr/{r}").decode() for r in range(3)]
        for _ in range(100):
            store.add("counter", 1)
        store.set(f"done/{rank}", b"1")
        print(",".join(peers))
    """
    procs = [_spawn(body, master.port, rank) for rank in range(3)]
    try:
        for _ in range(100):
            master.add("counter", 1)
        master.wait([f"done/{r}" for r in range(3)])
        outs = [p.communicate(timeout=3) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "10.0.0.0:29500,10.0.0.1:29501,10.0.0.2:29502"
    assert master.get("counter") == b"400"
    assert master.add("counter", 0) == 400


def test_add_is_atomic_across_concurrent_clients(master, stores):
    clients = [stores(master.port) for _ in range(4)]

    def work(c):
        return [c.add("n", 1) for _ in range(100)]

    results = _run_threads([lambda c=c: work(c) for c in clients])
    # Every increment saw a distinct value: no two adds read the same old count.
    assert sorted(v for r in results for v in r) == list(range(1, 401))
    assert master.get("n") == b"400"
    assert master.add("n", -400) == 0


def test_one_client_shared_by_threads_keeps_replies_apart(master):
    # One connection, four threads: each reply must reach the thread that asked.
    def work(i):
        for j in range(50):
            master.set(f"t{i}", f"{i}-{j}")
            assert master.get(f"t{i}") == f"{i}-{j}".encode()
            master.add("shared", 2)

    _run_threads([lambda i=i: work(i) for i in range(4)])
    assert master.add("shared", 0) == 400


def test_wait_timeout_is_quick_and_names_the_missing_keys(master):
    master.set("present", b"x")
    start = time.monotonic()
    with pytest.raises(DistTimeoutError) as info:
        master.wait(["present", "missing_key"], datetime.timedelta(seconds=0.3))
    elapsed = time.monotonic() - start
    assert 0.25 <= elapsed < 1.5
    msg = str(info.value)
    assert "missing_key" in msg and "present" not in msg and f"{HOST}:{master.port}" in msg
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, RuntimeError)

    master.set_timeout(datetime.timedelta(seconds=0.3))
    assert master.timeout == datetime.timedelta(seconds=0.3)
    start = time.monotonic()
    with pytest.raises(DistTimeoutError, match="never_set"):
        master.get("never_set")
    assert time.monotonic() - start < 1.5
    # A timed-out request leaves the connection usable, and a set after it is not misdelivered.
    master.set("never_set", b"now")
    assert master.get("never_set") == b"now"
    assert master.get("present") == b"x"


def test_client_connects_before_the_master_starts(stores):
    port = _free_port()
    got = {}

    def client():
        c = stores(port)  # retries connecting until the master listens
        got["connected_at"] = time.monotonic()
        got["value"] = c.get("hello")

    t = threading.Thread(target=client, daemon=True)
    t.start()
    time.sleep(0.5)
    started = time.monotonic()
    master = stores(port, is_master=True)
    master.set("hello", b"world")
    t.join(3)
    assert not t.is_alive()
    assert got["value"] == b"world"
    assert got["connected_at"] >= started


def test_connect_timeout_names_host_and_port(stores):
    port = _free_port()
    start = time.monotonic()
    with pytest.raises(DistTimeoutError, match=f"{HOST}:{port}"):
        stores(port, timeout=datetime.timedelta(seconds=0.3))
    assert time.monotonic() - start < 1.5


def test_master_waits_for_workers(stores):
    port = _free_port()
    joined = []

    def late_worker():
        time.sleep(0.3)
        joined.append(stores(port))

    threads = [threading.Thread(target=late_worker, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    start = time.monotonic()
    master = stores(port, is_master=True, world_size=3)
    assert time.monotonic() - start >= 0.25  # returned only once both workers connected
    for t in threads:
        t.join(3)
    assert len(joined) == 2
    # The worker count lives under a reserved key: it is not one of the user's keys.
    assert master.num_keys() == 0

    # world_size 1 (the master alone) does not wait; without wait_for_workers nobody waits.
    assert stores(is_master=True, world_size=1).num_keys() == 0
    start = time.monotonic()
    stores(is_master=True, world_size=8, wait_for_workers=False)
    assert time.monotonic() - start < 0.5


def test_wait_for_workers_times_out_and_frees_the_port(stores):
    port = _free_port()
    threading.Thread(target=lambda: stores(port), daemon=True).start()
    start = time.monotonic()
    with pytest.raises(DistTimeoutError, match="waiting for 3 clients") as info:
        stores(port, is_master=True, world_size=3, timeout=datetime.timedelta(seconds=0.4))
    assert time.monotonic() - start < 2
    assert f":{port}" in str(info.value)
    assert not _server_threads(port)
    stores(port, is_master=True).set("rebound", b"1")  # the failed master closed its socket


def test_a_client_dying_mid_session_does_not_stop_the_others(master, stores):
    survivor = stores(master.port)
    # The doomed process is parked in a blocking get when it is killed, so the server holds a
    # waiter for a connection that then vanishes.
    body = """
        store.add("members", 1)
        store.set("doomed_ready", b"1")
        store.get("never_arrives")
    """
    proc = _spawn(body, master.port, 0)
    try:
        master.wait(["doomed_ready"])
        time.sleep(0.1)  # let its get reach the server
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # Misbehaving peers too: a garbage frame, a huge length prefix, a half-sent frame.
    for junk in (b"\x00\x00\x00\x03\xff\x00\x00", b"\xff\xff\xff\xffGET / HTTP/1.1\r\n", b"\x00\x00"):
        with socket.create_connection((HOST, master.port)) as s:
            s.sendall(junk)

    master.set("never_arrives", b"too late")  # its waiter's connection is gone
    survivor.set("still", b"here")
    assert master.get("still") == b"here"
    assert survivor.add("members", 1) == 2
    assert survivor.get("never_arrives") == b"too late"
    assert stores(master.port).get("still") == b"here"  # and new clients are still accepted


def test_client_of_a_closed_master_reports_unreachable_store(stores):
    master = stores(is_master=True)
    port = master.port
    client = stores(port)
    client.set("k", b"v")
    blocked = {}

    def blocked_get():
        try:
            client.get("never")
        except Exception as e:  # noqa: BLE001 - inspected below
            blocked["error"] = e

    t = threading.Thread(target=blocked_get, daemon=True)
    t.start()
    time.sleep(0.2)
    master.close()
    assert not _server_threads(port)  # close() stopped the server thread
    t.join(2)
    assert not t.is_alive(), "a get blocked on a closed master must fail, not hang"
    err = blocked["error"]
    assert type(err) is store_module.DistStoreError
    assert "unreachable" in str(err) and f"{HOST}:{port}" in str(err)
    with pytest.raises(store_module.DistStoreError, match="unreachable"):
        client.set("k", b"again")
    with pytest.raises(store_module.DistStoreError):
        master.get("k")  # the closed object itself


def test_garbage_collected_master_stops_its_server():
    master = TCPStore(HOST, 0, is_master=True, timeout=SHORT)
    port = master.port
    assert _server_threads(port)
    del master
    gc.collect()
    deadline = time.monotonic() + 2
    while _server_threads(port) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _server_threads(port)
    with pytest.raises(DistTimeoutError):
        TCPStore(HOST, port, timeout=datetime.timedelta(seconds=0.2))


def test_prefix_store_isolation(master, stores):
    client = stores(master.port)
    a, b = PrefixStore("group_a", master), PrefixStore("group_b", client)
    a.set("id", b"A")
    b.set("id", b"B")
    assert a.get("id") == b"A" and b.get("id") == b"B"
    assert master.get("group_a/id") == b"A" and master.get("group_b/id") == b"B"
    assert not master.check(["id"])
    assert a.add("count", 5) == 5 and b.add("count", 1) == 1
    assert b.check(["id", "count"]) and not b.check(["id", "absent"])
    nested = PrefixStore("sub", a)
    nested.set("x", b"1")
    assert master.get("group_a/sub/x") == b"1"
    assert a.compare_set("id", b"A", b"A2") == b"A2" and b.get("id") == b"B"
    assert b.delete_key("id") and a.get("id") == b"A2"
    # (Set through another connection: b's is busy with the wait.)
    timer = threading.Timer(0.2, lambda: PrefixStore("group_b", master).set("late", b"1"))
    timer.start()
    try:
        b.wait(["late"])
    finally:
        timer.join()
    with pytest.raises(DistTimeoutError, match="group_a/late"):
        a.wait(["late"], datetime.timedelta(seconds=0.2))
    a.set_timeout(datetime.timedelta(seconds=2))
    assert master.timeout == datetime.timedelta(seconds=2) == a.timeout
    assert a.port == master.port and a.underlying_store is master


def test_compare_set_semantics(master, stores):
    # Missing key, empty expected: created with the desired value.
    assert master.compare_set("k", b"", b"first") == b"first"
    assert master.get("k") == b"first"
    # Missing key, non-empty expected: nothing is created and `expected` comes back (torch).
    assert master.compare_set("absent", b"exp", b"new") == b"exp"
    assert not master.check(["absent"])
    # Present key: swapped only on a match; the value now held is returned either way.
    assert master.compare_set("k", b"first", "second") == b"second"
    assert master.compare_set("k", b"stale", b"third") == b"second"
    assert master.get("k") == b"second"

    # Exactly one of several racing clients wins a compare_set election.
    clients = [stores(master.port) for _ in range(4)]
    got = _run_threads([lambda i=i, c=c: c.compare_set("leader", b"", str(i).encode())
                        for i, c in enumerate(clients)])
    assert len(set(got)) == 1 and master.get("leader") == got[0]

    # A compare_set that creates a key wakes a get waiting for it.
    timer = threading.Timer(0.2, lambda: clients[0].compare_set("woken", b"", b"yes"))
    timer.start()
    try:
        assert master.get("woken") == b"yes"
    finally:
        timer.join()


def test_delete_key_num_keys_check(master, stores):
    client = stores(master.port)
    assert master.num_keys() == 0
    master.set("a", b"1")
    client.set("b", b"2")
    assert master.add("c", 7) == 7 and client.get("c") == b"7"
    assert client.num_keys() == 3
    assert master.check(["a", "b", "c"]) and not master.check(["a", "nope"])
    assert client.delete_key("a") is True
    assert client.delete_key("a") is False
    assert master.num_keys() == 2 and not master.check(["a"])
    master.set("b", b"xyz")
    with pytest.raises(store_module.DistStoreError, match="not an integer"):
        master.add("b", 1)
    assert master.add("c", -10) == -3  # the failed add did not break the connection


def test_blocked_get_does_not_spin(master, stores):
    # A parked get must cost (almost) no CPU in the client or the in-process server thread.
    client = stores(master.port)
    cpu0 = time.process_time()
    with _set_later(client, "slow", b"1", 0.6):
        assert master.get("slow") == b"1"
    assert time.process_time() - cpu0 < 0.15
