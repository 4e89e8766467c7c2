"""Key-value store for the rendezvous of process groups, as ``torch.distributed.TCPStore``.

    master = TCPStore("0.0.0.0", 0, world_size=2, is_master=True, wait_for_workers=False)
    worker = TCPStore(master_addr, master.port, world_size=2)     # in another process
    master.set("nccl_id", unique_id); worker.get("nccl_id")        # get blocks until set

Why it exists: before the ranks of a process group can talk to each other they must agree on
something only one of them knows (an NCCL unique id of 128 bytes, gloo's listening addresses,
"everybody is here"). The one thing all ranks share is MASTER_ADDR:MASTER_PORT, so rank 0 runs
this small server there and every rank (rank 0 included) is a client of it. It carries only
these few small values: collectives never go through it, so the design favours simplicity and
clear failures over throughput. It is plain Python over the standard library; its errors
derive from pyflame.DistError.

Shape: the master binds ``host_name:port`` on all interfaces (port 0 picks a free port, read
back from ``store.port``) and serves from one daemon thread; every ``TCPStore`` object, master
included, holds one TCP connection to it and sends one request at a time under a lock (so one
object may be shared by threads). Frames are a 4-byte length then a payload of an op/status
byte and length-prefixed fields (struct, network order). Values are bytes; ``add`` counters are
stored as ASCII decimals, as torch does, so ``get`` of a counter reads ``b"3"``.

How blocking works: the server is a single-threaded ``selectors`` loop, so every operation is
atomic (``add``, ``compare_set``) without locks. A ``get``/``wait`` on keys that do not exist
yet does not poll: the request is parked as a waiter under each missing key, and the reply is
sent from ``set``/``add``/``compare_set`` when the last missing key appears; a heap of
deadlines wakes the loop when the earliest waiter times out (the client sends its timeout with
the request, so the server answers TIMEOUT and the connection stays in step). The client also
waits on its socket for the timeout plus a grace period, in case the server is stuck.

Failures: a client that disconnects (a rank that died) only loses its own connection and any
waiter it had; the server keeps serving the others. A client whose connection to the server is
lost raises ``DistStoreError`` naming the unreachable store's host:port, and stays failed (no
reconnecting: a restarted master would be a different, empty store). Clients retry connecting
until their timeout, since the master may start after them. ``close()`` (or garbage
collection) closes the connection and, on the master, stops the server thread.

Reserved keys (worker counting for ``wait_for_workers``) start with a NUL character and are not
counted by ``num_keys``.
"""

import datetime
import heapq
import math
import selectors
import socket
import struct
import threading
import time

from .. import _C

__all__ = ["DistStoreError", "DistTimeoutError", "TCPStore", "PrefixStore"]


class DistStoreError(_C.DistError):
    """The store failed: unreachable server, closed store, or an invalid operation."""


class DistTimeoutError(DistStoreError, TimeoutError):
    """A store operation did not complete within its timeout."""


# Ops (request) and statuses (reply): the first payload byte.
_SET, _GET, _ADD, _WAIT, _CHECK, _DELETE, _NUM_KEYS, _COMPARE_SET = range(1, 9)
_OK, _TIMEOUT, _ERROR = range(3)

_LEN = struct.Struct("!I")
_I64 = struct.Struct("!q")
_F64 = struct.Struct("!d")
# A rendezvous value is tiny; a bigger frame means a foreign client (an HTTP probe, a port
# scanner) and is dropped rather than buffered.
_MAX_FRAME = 64 << 20
# Extra time a client waits on its socket beyond a request's timeout: the server answers
# TIMEOUT itself at the deadline, so this only matters when the server is stuck.
_REPLY_GRACE_S = 10.0

_RESERVED = "\x00pyflame_store/"
_WORKERS_KEY = _RESERVED + "num_workers"
_JOINED_PREFIX = _RESERVED + "joined/"


def _encode(code, fields):
    parts = [bytes((code,))]
    for f in fields:
        parts.append(_LEN.pack(len(f)))
        parts.append(f)
    payload = b"".join(parts)
    return _LEN.pack(len(payload)) + payload


def _decode(payload):
    """(code, [field bytes]) of one frame's payload; raises ValueError when malformed."""
    if not payload:
        raise ValueError("empty frame")
    fields, pos, end = [], 1, len(payload)
    while pos < end:
        if pos + 4 > end:
            raise ValueError("truncated field length")
        (n,) = _LEN.unpack_from(payload, pos)
        pos += 4
        if pos + n > end:
            raise ValueError("truncated field")
        fields.append(payload[pos:pos + n])
        pos += n
    return payload[0], fields


def _key_bytes(key):
    if not isinstance(key, str):
        raise TypeError(f"store keys are str, got {type(key).__name__}")
    return key.encode("utf-8")


def _value_bytes(value):
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"store values are bytes or str, got {type(value).__name__}")


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)):
        return float(timeout)
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


# ---------------------------------------------------------------------------------------------
# Server


class _Conn:
    __slots__ = ("sock", "inbuf", "outbuf", "waiter", "closed", "events")

    def __init__(self, sock):
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.waiter = None  # the parked get/wait of this connection, if any
        self.closed = False
        self.events = selectors.EVENT_READ


class _Waiter:
    __slots__ = ("conn", "op", "keys", "missing", "deadline", "done")

    def __init__(self, conn, op, keys, missing, deadline):
        self.conn = conn
        self.op = op
        self.keys = keys
        self.missing = missing
        self.deadline = deadline
        self.done = False


class _Server:
    """The master's key-value server: one thread, one selector, no locks (see module doc)."""

    def __init__(self, port):
        # Dual-stack where possible so clients reaching the master as "localhost" (::1) or by
        # an IPv4 address both connect; create_server sets SO_REUSEADDR on POSIX, so a
        # restarted job can rebind a port still in TIME_WAIT.
        if socket.has_dualstack_ipv6():
            self._listener = socket.create_server(("", port), family=socket.AF_INET6,
                                                  dualstack_ipv6=True, backlog=1024)
        else:
            self._listener = socket.create_server(("", port), backlog=1024)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        # close() from another thread writes here to wake select(); closing the listener
        # alone does not reliably interrupt a blocked select/accept.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._data = {}
        self._waiters = {}  # key -> set of _Waiter parked on it
        self._deadlines = []  # heap of (deadline, seq, _Waiter); done waiters removed lazily
        self._seq = 0
        self._runnable = []  # connections whose parked request finished: parse their next one
        self._conns = set()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"pyflame-store-{self.port}",
                                        daemon=True)
        self._thread.start()

    def stop(self):
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    @property
    def alive(self):
        return self._thread.is_alive()

    # -- event loop ---------------------------------------------------------------------------

    def _run(self):
        try:
            while not self._stopping:
                for key, mask in self._sel.select(self._select_timeout()):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    else:
                        conn = key.data
                        try:
                            if mask & selectors.EVENT_WRITE and not conn.closed:
                                self._flush(conn)
                            if mask & selectors.EVENT_READ and not conn.closed:
                                self._read(conn)
                        except Exception:
                            # Whatever went wrong is this client's problem: the rendezvous of
                            # every other rank must not die with it.
                            self._drop(conn)
                self._expire()
                while self._runnable:
                    conn = self._runnable.pop()
                    if not conn.closed:
                        try:
                            self._parse(conn)
                        except Exception:
                            self._drop(conn)
        finally:
            for conn in list(self._conns):
                self._drop(conn)
            self._sel.close()
            for s in (self._listener, self._wake_r, self._wake_w):
                s.close()

    def _select_timeout(self):
        while self._deadlines and self._deadlines[0][2].done:
            heapq.heappop(self._deadlines)
        if not self._deadlines or math.isinf(self._deadlines[0][0]):
            return None
        return max(0.0, self._deadlines[0][0] - time.monotonic())

    def _accept(self):
        # Several connections may be pending (all ranks start at once): take them all.
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. EMFILE: leave it in the backlog, retry on the next event
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock)
            self._conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _drop(self, conn):
        """Forget a connection (client gone or misbehaving); everything else carries on."""
        if conn.closed:
            return
        conn.closed = True
        self._conns.discard(conn)
        if conn.waiter is not None:
            self._cancel(conn.waiter)
            conn.waiter = None
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _read(self, conn):
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not data:
            self._drop(conn)
            return
        conn.inbuf += data
        self._parse(conn)

    def _parse(self, conn):
        # One request at a time per connection: while one is parked, later bytes wait in inbuf
        # so replies go back in request order.
        while conn.waiter is None and not conn.closed and len(conn.inbuf) >= 4:
            (n,) = _LEN.unpack_from(conn.inbuf, 0)
            if n > _MAX_FRAME:
                self._drop(conn)
                return
            if len(conn.inbuf) < 4 + n:
                return
            payload = bytes(conn.inbuf[4:4 + n])
            del conn.inbuf[:4 + n]
            try:
                self._handle(conn, *_decode(payload))
            except (ValueError, struct.error, UnicodeDecodeError, IndexError):
                self._drop(conn)  # not our protocol

    def _reply(self, conn, status, fields=()):
        conn.outbuf += _encode(status, fields)
        self._flush(conn)

    def _flush(self, conn):
        if conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
                del conn.outbuf[:sent]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._drop(conn)
                return
        # Ask for writability only while output is pending, or select() would spin.
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        if want != conn.events:
            conn.events = want
            self._sel.modify(conn.sock, want, conn)

    # -- operations ---------------------------------------------------------------------------

    def _handle(self, conn, op, f):
        data = self._data
        if op == _SET:
            self._put(f[0].decode("utf-8"), f[1])
            self._reply(conn, _OK)
        elif op == _GET:
            key = f[0].decode("utf-8")
            if key in data:
                self._reply(conn, _OK, [data[key]])
            else:
                self._park(conn, _GET, [key], _F64.unpack(f[1])[0])
        elif op == _ADD:
            key = f[0].decode("utf-8")
            (amount,) = _I64.unpack(f[1])
            old = data.get(key, b"0")
            try:
                value = int(old) + amount
            except ValueError:
                self._reply(conn, _ERROR, [f"add: the value of key {key!r} is not an integer: "
                                           f"{old[:64]!r}".encode()])
                return
            if not -(1 << 63) <= value < (1 << 63):
                self._reply(conn, _ERROR, [f"add: key {key!r} would overflow int64".encode()])
                return
            self._put(key, str(value).encode())
            self._reply(conn, _OK, [_I64.pack(value)])
        elif op == _WAIT:
            keys = [k.decode("utf-8") for k in f[1:]]
            if all(k in data for k in keys):
                self._reply(conn, _OK)
            else:
                self._park(conn, _WAIT, keys, _F64.unpack(f[0])[0])
        elif op == _CHECK:
            ok = all(k.decode("utf-8") in data for k in f)
            self._reply(conn, _OK, [b"\x01" if ok else b"\x00"])
        elif op == _DELETE:
            existed = data.pop(f[0].decode("utf-8"), None) is not None
            self._reply(conn, _OK, [b"\x01" if existed else b"\x00"])
        elif op == _NUM_KEYS:
            n = sum(1 for k in data if not k.startswith(_RESERVED))
            self._reply(conn, _OK, [_I64.pack(n)])
        elif op == _COMPARE_SET:
            key, expected, desired = f[0].decode("utf-8"), f[1], f[2]
            # torch's semantics, including its quirk for a missing key: with expected == b""
            # the key is created; otherwise nothing changes and `expected` is returned.
            if key not in data:
                if expected == b"":
                    self._put(key, desired)
                    self._reply(conn, _OK, [desired])
                else:
                    self._reply(conn, _OK, [expected])
            else:
                if data[key] == expected:
                    self._put(key, desired)
                self._reply(conn, _OK, [data[key]])
        else:
            self._reply(conn, _ERROR, [f"unknown store op {op}".encode()])

    def _put(self, key, value):
        self._data[key] = value
        parked = self._waiters.pop(key, None)
        if not parked:
            return
        for w in parked:
            w.missing.discard(key)
            if w.missing or w.done:
                continue
            w.done = True
            w.conn.waiter = None
            if w.op == _GET:
                self._reply(w.conn, _OK, [self._data[w.keys[0]]])
            else:
                self._reply(w.conn, _OK)
            # Its next request (if already sent) is parsed by the loop, not from inside this
            # set, so one request never runs in the middle of another.
            self._runnable.append(w.conn)

    def _park(self, conn, op, keys, timeout_s):
        now = time.monotonic()
        deadline = now + timeout_s if timeout_s >= 0 and not math.isinf(timeout_s) else math.inf
        missing = {k for k in keys if k not in self._data}
        w = _Waiter(conn, op, keys, missing, deadline)
        conn.waiter = w
        for k in missing:
            self._waiters.setdefault(k, set()).add(w)
        self._seq += 1
        heapq.heappush(self._deadlines, (deadline, self._seq, w))
        if deadline <= now:
            self._expire()

    def _cancel(self, w):
        w.done = True
        for k in w.missing:
            parked = self._waiters.get(k)
            if parked is not None:
                parked.discard(w)
                if not parked:
                    del self._waiters[k]

    def _expire(self):
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, w = heapq.heappop(self._deadlines)
            if w.done:
                continue
            missing = sorted(w.missing)
            self._cancel(w)
            w.conn.waiter = None
            self._reply(w.conn, _TIMEOUT, [k.encode("utf-8") for k in missing])
            self._runnable.append(w.conn)


# ---------------------------------------------------------------------------------------------
# Client


class TCPStore:
    """A client of the rendezvous store at ``host_name:port``; with ``is_master`` also its server.

    ``world_size`` (all processes, master included) with ``wait_for_workers`` makes the
    master's constructor return only once that many clients have connected. ``timeout`` is the
    default for connecting, ``get`` and ``wait``; it raises ``DistTimeoutError``.
    """

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=datetime.timedelta(seconds=300), wait_for_workers=True):
        self._host = host_name
        self._port = int(port)
        self._world_size = world_size
        self._is_master = bool(is_master)
        self._timeout = _seconds(timeout)
        self._lock = threading.Lock()
        self._sock = None
        self._server = None
        self._closed = False
        self._lost = None  # why the connection broke; the store stays failed after that
        if not self._is_master and self._port == 0:
            raise ValueError("a TCPStore client needs the master's port (port 0 is only for the "
                             "master, which then picks a free port)")
        if world_size is not None and world_size < 1:
            raise ValueError(f"world_size must be at least 1, got {world_size}")
        try:
            if self._is_master:
                self._server = _Server(self._port)
                self._port = self._server.port
            self._sock = self._connect(time.monotonic() + self._timeout)
            # Every client counts itself in; the one that completes the count marks it, so the
            # master's wait below is an ordinary server-side wait on a key, not polling.
            n = self._add(_WORKERS_KEY, 1)
            self._request(_SET, [_key_bytes(_JOINED_PREFIX + str(n)), b""])
            if self._is_master and world_size is not None and wait_for_workers:
                self._wait_for_workers()
        except BaseException:
            self.close()
            raise

    # -- properties ---------------------------------------------------------------------------

    @property
    def host(self):
        return self._host

    @property
    def port(self):
        return self._port

    @property
    def world_size(self):
        return self._world_size

    @property
    def timeout(self):
        return datetime.timedelta(seconds=self._timeout)

    def set_timeout(self, timeout):
        self._timeout = _seconds(timeout)

    # -- operations ---------------------------------------------------------------------------

    def set(self, key, value):
        self._request(_SET, [_key_bytes(key), _value_bytes(value)])

    def get(self, key):
        """The value of `key`, waiting up to the store's timeout for some client to set it."""
        kb = _key_bytes(key)
        status, f = self._request(_GET, [kb, _F64.pack(self._timeout)], wait_s=self._timeout)
        if status == _TIMEOUT:
            raise DistTimeoutError(f"timed out after {self._timeout:g}s in get waiting for key "
                                   f"{key!r} in the store at {self._where()}")
        return f[0]

    def add(self, key, amount):
        return self._add(key, amount)

    def wait(self, keys, timeout=None):
        """Block until every key in `keys` exists, up to `timeout` (default: the store's)."""
        if isinstance(keys, str):
            keys = [keys]
        t = self._timeout if timeout is None else _seconds(timeout)
        status, f = self._request(_WAIT, [_F64.pack(t)] + [_key_bytes(k) for k in keys],
                                  wait_s=t)
        if status == _TIMEOUT:
            missing = [k.decode("utf-8") for k in f]
            raise DistTimeoutError(f"timed out after {t:g}s in wait for key(s) {missing} in "
                                   f"the store at {self._where()}")

    def check(self, keys):
        if isinstance(keys, str):
            keys = [keys]
        _, f = self._request(_CHECK, [_key_bytes(k) for k in keys])
        return f[0] == b"\x01"

    def delete_key(self, key):
        _, f = self._request(_DELETE, [_key_bytes(key)])
        return f[0] == b"\x01"

    def num_keys(self):
        _, f = self._request(_NUM_KEYS, [])
        return _I64.unpack(f[0])[0]

    def compare_set(self, key, expected_value, desired_value):
        """Set `key` to `desired_value` if it holds `expected_value`; returns the value now held.

        As torch: a missing key is created when `expected_value` is empty, otherwise left
        missing and `expected_value` is returned.
        """
        _, f = self._request(_COMPARE_SET, [_key_bytes(key), _value_bytes(expected_value),
                                            _value_bytes(desired_value)])
        return f[0]

    def close(self):
        """Close the connection; on the master also stop the server (other clients then fail)."""
        self._closed = True
        # Not under the lock: a get blocked in another thread holds it; shutting the socket
        # down is what wakes that thread (it then reports the store closed).
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_sock", None) is not None or getattr(self, "_server", None):
                self.close()
        except Exception:
            pass

    def __repr__(self):
        role = "master" if self._is_master else "client"
        return f"TCPStore({role} of {self._where()})"

    # -- internals ----------------------------------------------------------------------------

    def _where(self):
        return f"{self._host}:{self._port}"

    def _connect(self, deadline):
        # The master may not be listening yet (ranks start in any order): retry until the
        # deadline with a short capped backoff, so a late master is found within ~0.1 s.
        delay, last = 0.01, None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                sock = socket.create_connection((self._host, self._port), timeout=remaining)
            except OSError as e:
                last = e
                if self._closed:
                    raise DistStoreError(f"store at {self._where()} closed while connecting")
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                delay = min(delay * 2, 0.1)
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise DistTimeoutError(f"timed out after {self._timeout:g}s connecting to the store at "
                               f"{self._where()} (last error: {last})")

    def _add(self, key, amount):
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"add amount must be an int, got {type(amount).__name__}")
        if not -(1 << 63) <= amount < (1 << 63):
            raise ValueError(f"add amount {amount} does not fit in int64")
        _, f = self._request(_ADD, [_key_bytes(key), _I64.pack(amount)])
        return _I64.unpack(f[0])[0]

    def _wait_for_workers(self):
        key = _JOINED_PREFIX + str(self._world_size)
        t = self._timeout
        status, _ = self._request(_WAIT, [_F64.pack(t), _key_bytes(key)], wait_s=t)
        if status == _TIMEOUT:
            n = self._add(_WORKERS_KEY, 0)
            raise DistTimeoutError(f"timed out after {t:g}s waiting for {self._world_size} "
                                   f"clients of the store at {self._where()}: {n} connected")

    def _request(self, op, fields, wait_s=None):
        """Send one request and read its reply: (status, fields); _ERROR is raised here."""
        frame = _encode(op, fields)
        with self._lock:
            sock = self._sock
            if sock is None:
                raise self._unusable()
            # A parked get/wait is answered by the server at its deadline; the socket timeout
            # is only the backstop for a stuck server.
            reply_timeout = self._timeout if wait_s is None else max(wait_s, 0.0) + _REPLY_GRACE_S
            sock.settimeout(reply_timeout)
            try:
                sock.sendall(frame)
                status, reply = _decode(_recv_frame(sock))
            except socket.timeout:
                self._lose("no reply in time")
                raise DistTimeoutError(f"no reply from the store at {self._where()} within "
                                       f"{reply_timeout:g}s; the connection is abandoned")
            except (OSError, EOFError, ValueError) as e:
                self._lose(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
                raise self._unusable() from e
        if status == _ERROR:
            raise DistStoreError(f"{reply[0].decode('utf-8', 'replace')} "
                                 f"(store at {self._where()})")
        return status, reply

    def _lose(self, why):
        # Called with the lock held. The stream may be mid-reply, so it can't be reused.
        self._lost = why
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def _unusable(self):
        if self._closed:
            return DistStoreError(f"the store client of {self._where()} is closed")
        return DistStoreError(f"the store at {self._where()} is unreachable "
                              f"(connection lost: {self._lost})")


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the server closed the connection")
        buf += chunk
    return bytes(buf)


def _recv_frame(sock):
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    if n > _MAX_FRAME:
        raise ValueError(f"reply frame of {n} bytes is too large")
    return _recv_exact(sock, n)


# ---------------------------------------------------------------------------------------------


class PrefixStore:
    """A view of `store` whose keys are all prefixed with ``prefix + "/"`` (for sub-groups)."""

    def __init__(self, prefix, store):
        self._prefix = prefix
        self._store = store

    @property
    def underlying_store(self):
        return self._store

    @property
    def prefix(self):
        return self._prefix

    def _k(self, key):
        return f"{self._prefix}/{key}"

    def set(self, key, value):
        self._store.set(self._k(key), value)

    def get(self, key):
        return self._store.get(self._k(key))

    def add(self, key, amount):
        return self._store.add(self._k(key), amount)

    def wait(self, keys, timeout=None):
        if isinstance(keys, str):
            keys = [keys]
        self._store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys):
        if isinstance(keys, str):
            keys = [keys]
        return self._store.check([self._k(k) for k in keys])

    def delete_key(self, key):
        return self._store.delete_key(self._k(key))

    def num_keys(self):
        # As torch: the count of the whole underlying store, not of this prefix.
        return self._store.num_keys()

    def compare_set(self, key, expected_value, desired_value):
        return self._store.compare_set(self._k(key), expected_value, desired_value)

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    @property
    def timeout(self):
        return self._store.timeout

    @property
    def host(self):
        return self._store.host

    @property
    def port(self):
        return self._store.port

    def __repr__(self):
        return f"PrefixStore({self._prefix!r}, {self._store!r})"
