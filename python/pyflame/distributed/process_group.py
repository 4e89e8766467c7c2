"""Process groups and their collectives, as torch.distributed's.

A process group is a set of ranks (processes) that run the same collectives in the same
order. Its members meet through a rendezvous store (store.py: rank 0 serves it at
MASTER_ADDR:MASTER_PORT); the data then moves through a backend library, never through
the store: gloo (TCP) for tensors on the CPU, NCCL (RCCL on AMD) for tensors on a GPU.
A group holds one gloo context and one NCCL communicator per GPU, each made on the first
collective that needs it (every rank reaches that collective, so every rank makes it).

Completion: gloo's collectives end before they return. NCCL's run on the communicator's
stream while the caller's stream goes on; `wait()` (called at once unless async_op=True)
makes the caller's current stream wait for them, as PyTorch's NCCL backend. The Work
object keeps the tensors alive until then.
"""

import datetime
import enum
import os
import pickle
import socket

import numpy as np

from .. import _C
from ..backend.rocm import _dtype_name, _preload_wheel_library
from .store import PrefixStore, TCPStore

DistError = _C.DistError
DistBackendError = _C.DistBackendError

# torch's defaults: 10 minutes for NCCL, 30 for the others.
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
_DEFAULT_NCCL_TIMEOUT = datetime.timedelta(minutes=10)


class ReduceOp(enum.IntEnum):
    """How all_reduce and reduce_scatter combine: torch.distributed.ReduceOp's names.
    AVG needs a floating dtype. Bool tensors reduce as PyTorch's: SUM and MAX as a logical
    or, PRODUCT and MIN as a logical and."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


class Backend:
    """Backend names, as torch.distributed.Backend."""

    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"


def _gloo_module():
    try:
        from .. import _gloo
    except ImportError:
        return None
    return _gloo


def _load_nccl_library():
    """Puts NCCL in the process before the ROCm backend opens it by name: the copy of
    NVIDIA's nvidia-nccl wheel (PyTorch's) where one is installed, else the system's."""
    if not os.environ.get("PYFLAME_NCCL_LIBRARY"):
        _preload_wheel_library("nvidia/nccl/lib/libnccl.so.*")


def _nccl_module():
    try:
        from .. import _rocm
    except ImportError:
        return None
    if not hasattr(_rocm, "NcclCommunicator"):  # built without the NCCL header
        return None
    _load_nccl_library()
    return _rocm


def is_available():
    return True


def is_gloo_available():
    """Whether this build has the gloo backend (built where the system has gloo, e.g. Debian's libgloo-dev)."""
    return _gloo_module() is not None


def is_nccl_available():
    """Whether this build has the NCCL backend and the NCCL (RCCL) library loads."""
    rocm = _nccl_module()
    return rocm is not None and rocm.nccl_available()


def is_mpi_available():
    """False: PyFlame's CPU backend is gloo (see docs/distributed.md)."""
    return False


def _nccl_unavailable_reason():
    rocm = _nccl_module()
    if rocm is None:
        return "this build of PyFlame has no NCCL backend (a GPU build with NCCL's header: pip install nvidia-nccl-cu13)"
    return rocm.nccl_unavailable_reason()


def _parse_backend(backend):
    """{'cpu': 'gloo' | None, 'rocm': 'nccl' | None} from torch's backend strings:
    None (both, where available), 'gloo', 'nccl', or 'cpu:gloo,cuda:nccl'."""
    if backend is None:
        return {"cpu": "gloo" if is_gloo_available() else None, "rocm": "nccl" if is_nccl_available() else None}
    if not isinstance(backend, str):
        raise TypeError(f"init_process_group(): backend must be a string, got {type(backend).__name__}")
    name = backend.lower()
    if name == Backend.MPI:
        raise _C.NotSupportedError("init_process_group(): the 'mpi' backend is not supported; use 'gloo' for CPU tensors")
    if name in (Backend.GLOO, Backend.NCCL):
        devices = {"cpu": None, "rocm": None}
        devices["cpu" if name == Backend.GLOO else "rocm"] = name
    else:
        devices = {"cpu": None, "rocm": None}
        for part in name.split(","):
            device, colon, lib = part.strip().partition(":")
            device = "rocm" if device in ("cuda", "rocm") else device
            if not colon or device not in devices or lib not in (Backend.GLOO, Backend.NCCL):
                raise ValueError(f"init_process_group(): unknown backend {backend!r} (expected 'gloo', 'nccl' or "
                                 "'cpu:gloo,cuda:nccl')")
            devices[device] = lib
    if devices["cpu"] == Backend.NCCL:
        raise ValueError("init_process_group(): NCCL serves GPU tensors only; use gloo for the CPU")
    if devices["cpu"] and not is_gloo_available():
        raise _C.NotSupportedError("init_process_group(): this build of PyFlame has no gloo backend (it is built "
                                   "where gloo is installed: Debian's libgloo-dev)")
    if devices["rocm"] == Backend.GLOO:
        raise _C.NotSupportedError("init_process_group(): the gloo backend takes CPU tensors only; use 'nccl' for GPU tensors")
    if devices["rocm"] and not is_nccl_available():
        raise _C.NotSupportedError(f"init_process_group(): NCCL is not available: {_nccl_unavailable_reason()}")
    return devices


def _local_address(master_addr, master_port):
    """The address of this host's interface toward the master, where the other ranks reach it."""
    try:
        if socket.gethostbyname(master_addr).startswith("127."):
            return "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # no packet is sent
            s.connect((master_addr, master_port))
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


class Work:
    """A collective's completion (torch.distributed.Work): wait(), is_completed().

    `finish`, where given, runs once after the wait (copies out of a staging tensor)."""

    def __init__(self, native=None, tensors=(), finish=None):
        self._native = native
        self._tensors = tensors  # alive until the collective is waited for
        self._finish = finish
        self._waited = False

    def is_completed(self):
        return self._waited or self._native is None or self._native.is_completed()

    def wait(self, timeout=None):
        if not self._waited:
            if self._native is not None:
                self._native.wait()
            if self._finish is not None:
                self._finish()
            self._waited = True
            self._tensors = ()
        return True

    def synchronize(self):
        """Blocks the host until the collective ended (PyTorch: the stream waits; this is for timing)."""
        self.wait()
        if self._native is not None:
            self._native.synchronize()

    def __del__(self):
        # A dropped handle still orders the caller's stream after the collective, so its
        # tensors' memory is not reused while the collective reads or writes it.
        try:
            self.wait()
        except Exception:  # noqa: BLE001 (a destructor must not raise; the next collective reports it)
            pass


class ProcessGroup:
    """A group of ranks (torch.distributed.ProcessGroup). `ranks` are global ranks; rank()
    and size() are this process's place in the group and the group's size."""

    def __init__(self, store, ranks, rank, backends, timeout, address):
        self._store = store
        self.ranks = list(ranks)
        self._rank = rank
        self._backends = backends
        self._timeout = timeout
        self._address = address
        self._gloo = None
        self._nccl = {}  # device index -> NcclCommunicator
        self._tags = {}  # (peer, tag) -> messages so far (gloo matches a slot once)

    def rank(self):
        return self._rank

    def size(self):
        return len(self.ranks)

    def name(self):
        return ",".join(sorted({b for b in self._backends.values() if b}))

    def _engine(self, tensor, collective):
        """The backend object that serves `tensor`'s device."""
        kind = tensor.device.type
        backend = self._backends.get(kind)
        if backend is None:
            served = ", ".join(f"{d} ({b})" for d, b in self._backends.items() if b) or "none"
            raise ValueError(f"{collective}(): the process group has no backend for tensors on '{tensor.device}' "
                             f"(it serves: {served}); init_process_group(backend=...) chooses")
        if kind == "cpu":
            if self._gloo is None:
                self._gloo = _gloo_module().GlooGroup(self._rank, self.size(), self._store.set, self._store.get,
                                                      self._timeout.total_seconds(), self._address)
            return self._gloo
        device = tensor.device.index or 0
        comm = self._nccl.get(device)
        if comm is None:
            rocm = _nccl_module()
            key = f"nccl_unique_id/{len(self._nccl)}"  # each rank's n-th communicator, whatever its GPU
            if self._rank == 0:
                self._store.set(key, rocm.nccl_unique_id())
            comm = rocm.NcclCommunicator(device, self._rank, self.size(), self._store.get(key),
                                         self._timeout.total_seconds())
            self._nccl[device] = comm
        return comm

    def _next_tag(self, peer, tag):
        count = self._tags.get((peer, tag), 0)
        self._tags[(peer, tag)] = count + 1
        return (tag * 65536 + count) % (1 << 32)

    def shutdown(self):
        for comm in self._nccl.values():
            comm.abort()
        self._nccl.clear()
        self._gloo = None


class _World:
    def __init__(self):
        self.default_group = None
        self.store = None
        self.own_store = False
        self.groups = 0  # groups made so far (each all ranks make, in one order)


_world = _World()


class GroupMember:
    """torch's marker: WORLD is the default group; NON_GROUP_MEMBER what new_group returns
    to ranks outside the group."""

    WORLD = None
    NON_GROUP_MEMBER = object()


def is_initialized():
    return _world.default_group is not None


def _require_init(what):
    if _world.default_group is None:
        raise DistError(f"{what}(): the default process group has not been initialized; "
                        "call pyflame.distributed.init_process_group() first")


def _group(group, what):
    _require_init(what)
    return _world.default_group if group is None else group


def _env_int(name, value, what):
    if value is not None and value != -1:
        return int(value)
    if name not in os.environ:
        raise ValueError(f"init_process_group(): {what} is not given and the environment has no {name} "
                         "(python -m pyflame.distributed.run sets it, as torchrun)")
    return int(os.environ[name])


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", device_id=None):
    """Joins this process to the default group, as torch.distributed.init_process_group.

    backend: 'gloo' (CPU tensors), 'nccl' (GPU tensors), 'cpu:gloo,cuda:nccl', or None for
    both where available. The rendezvous is `init_method` 'env://' (the default: MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE from the environment, as the launcher and torchrun set
    them), 'tcp://host:port' with rank= and world_size=, or a given `store`. `timeout` (a
    datetime.timedelta) bounds the rendezvous and every collective."""
    if _world.default_group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group(): timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    backends = _parse_backend(backend)
    if timeout is None:
        timeout = _DEFAULT_NCCL_TIMEOUT if backends["rocm"] and not backends["cpu"] else _DEFAULT_TIMEOUT
    rank = _env_int("RANK", rank, "rank")
    world_size = _env_int("WORLD_SIZE", world_size, "world_size")
    if not 0 <= rank < world_size:
        raise ValueError(f"init_process_group(): rank {rank} is not in [0, {world_size})")
    if store is None:
        method = init_method or "env://"
        if method.startswith("env://"):
            if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
                raise ValueError("init_process_group(): env:// needs MASTER_ADDR and MASTER_PORT in the environment")
            host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        elif method.startswith("tcp://"):
            host, _, port = method[len("tcp://"):].rpartition(":")
            port = int(port)
        else:
            raise ValueError(f"init_process_group(): unsupported init_method {method!r} (env:// or tcp://host:port)")
        store = TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
        _world.own_store = True  # closed by destroy_process_group; a store given stays the caller's
        address = _local_address(host, port)
    else:
        address = _local_address("127.0.0.1", 0) if world_size == 1 else socket.gethostbyname(socket.gethostname())
    _world.store = store
    _world.default_group = ProcessGroup(PrefixStore("default_pg", store), range(world_size), rank, backends,
                                        timeout, address)
    # Everyone has joined before anyone goes on (torch's store barrier); the store's
    # timeout bounds the wait.
    if store.add("init_process_group/joined", 1) == world_size:
        store.set("init_process_group/all_joined", b"1")
    store.wait(["init_process_group/all_joined"])


def destroy_process_group(group=None):
    """Ends `group` (by default every group, and the default one)."""
    if group is None or group is _world.default_group:
        if _world.default_group is not None:
            _world.default_group.shutdown()
        if _world.own_store:
            _world.store.close()
        _world.default_group = None
        _world.store = None
        _world.own_store = False
        _world.groups = 0
    elif group is not GroupMember.NON_GROUP_MEMBER:
        group.shutdown()


def get_rank(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group, "get_rank").rank()


def get_world_size(group=None):
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group, "get_world_size").size()


def get_backend(group=None):
    return _group(group, "get_backend").name()


def new_group(ranks=None, timeout=None, backend=None):
    """A group of the given global ranks (all ranks by default). Every rank of the world
    calls it, in the same order, as torch requires; ranks outside get NON_GROUP_MEMBER."""
    world = _group(None, "new_group")
    ranks = sorted(world.ranks if ranks is None else ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < world.size() for r in ranks):
        raise ValueError(f"new_group(): ranks must be distinct ranks of the world [0, {world.size()}), got {ranks}")
    _world.groups += 1
    me = world.rank()
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    backends = world._backends if backend is None else _parse_backend(backend)
    return ProcessGroup(PrefixStore(f"group{_world.groups}", _world.store), ranks, ranks.index(me), backends,
                        timeout or world._timeout, world._address)


def _check_tensor(t, what):
    if not isinstance(t, _C.Tensor):
        raise TypeError(f"{what}(): expected a pyflame Tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{what}(): tensors must be contiguous")


def _group_rank(group, global_rank, what):
    if global_rank not in group.ranks:
        raise ValueError(f"{what}(): rank {global_rank} is not in the group (ranks {group.ranks})")
    return group.ranks.index(global_rank)


def _run(result, tensors, async_op, finish=None):
    """Wraps a backend's result: a Work for async_op, else waits and returns None."""
    work = Work(result, tensors, finish)
    if async_op:
        return work
    work.wait()
    return None


def _skip(group):
    return group is GroupMember.NON_GROUP_MEMBER


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `tensor` across the group, in place on every rank."""
    if _skip(group):
        return None
    g = _group(group, "all_reduce")
    _check_tensor(tensor, "all_reduce")
    engine = g._engine(tensor, "all_reduce")
    return _run(engine.all_reduce(tensor.data_ptr(), tensor.numel(), _dtype_name(tensor), int(ReduceOp(op))),
                (tensor,), async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copies `tensor` of global rank `src` into `tensor` on every rank of the group."""
    if _skip(group):
        return None
    g = _group(group, "broadcast")
    _check_tensor(tensor, "broadcast")
    root = _group_rank(g, src, "broadcast")
    engine = g._engine(tensor, "broadcast")
    return _run(engine.broadcast(tensor.data_ptr(), tensor.numel(), _dtype_name(tensor), root), (tensor,), async_op)


def _check_same(a, b, what, a_name, b_name):
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"{what}(): {a_name} ({a.dtype} on {a.device}) and {b_name} ({b.dtype} on {b.device}) "
                         "must have one dtype and one device")


def _group_of_blocks(what, group, whole, part, whole_name, part_name):
    """The group, once `whole` holds one block of `part`'s size per rank (one dtype and device)."""
    g = _group(group, what)
    for t in (whole, part):
        _check_tensor(t, what)
    _check_same(whole, part, what, whole_name, part_name)
    if whole.numel() != part.numel() * g.size():
        raise ValueError(f"{what}(): {whole_name} has {whole.numel()} elements; expected {g.size()} x {part.numel()}")
    return g


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's `input_tensor`, in rank order, into `output_tensor` (group size times as
    many elements: concatenated along dim 0, or stacked)."""
    if _skip(group):
        return None
    g = _group_of_blocks("all_gather_into_tensor", group, output_tensor, input_tensor, "output_tensor", "input_tensor")
    engine = g._engine(input_tensor, "all_gather_into_tensor")
    return _run(engine.all_gather(output_tensor.data_ptr(), input_tensor.data_ptr(), input_tensor.numel(),
                                  _dtype_name(input_tensor)), (output_tensor, input_tensor), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's `tensor` into `tensor_list[rank]` (one tensor per rank of the group)."""
    if _skip(group):
        return None
    g = _group(group, "all_gather")
    _check_tensor(tensor, "all_gather")
    if len(tensor_list) != g.size():
        raise ValueError(f"all_gather(): tensor_list has {len(tensor_list)} tensors; the group has {g.size()} ranks")
    for t in tensor_list:
        _check_same(t, tensor, "all_gather", "a tensor of tensor_list", "tensor")
        if tuple(t.shape) != tuple(tensor.shape):
            raise ValueError(f"all_gather(): tensor_list holds a tensor of shape {tuple(t.shape)}; expected "
                             f"{tuple(tensor.shape)}")
    from .. import empty

    staged = empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    engine = g._engine(tensor, "all_gather")
    result = engine.all_gather(staged.data_ptr(), tensor.data_ptr(), tensor.numel(), _dtype_name(tensor))

    def finish():
        for i, t in enumerate(tensor_list):
            t.copy_(staged[i])

    return _run(result, (staged, tensor), async_op, finish)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces `input` (group size blocks of `output`'s size) across the group; rank r gets block r."""
    if _skip(group):
        return None
    g = _group_of_blocks("reduce_scatter_tensor", group, input, output, "input", "output")
    engine = g._engine(input, "reduce_scatter_tensor")
    return _run(engine.reduce_scatter(output.data_ptr(), input.data_ptr(), output.numel(), _dtype_name(input),
                                      int(ReduceOp(op))), (output, input), async_op)


def _point_to_point(what, tensor, peer, group, tag):
    g = _group(group, what)
    _check_tensor(tensor, what)
    peer_rank = _group_rank(g, peer, what)
    if peer_rank == g.rank():
        raise ValueError(f"{what}(): a rank cannot {what} to or from itself")
    engine = g._engine(tensor, what)
    args = (tensor.data_ptr(), tensor.numel(), _dtype_name(tensor), peer_rank)
    if tensor.device.type == "cpu":
        direction = (g.rank(), peer_rank) if what in ("send", "isend") else (peer_rank, g.rank())
        args += (g._next_tag(direction, tag),)
    return getattr(engine, "send" if what in ("send", "isend") else "recv")(*args)


def send(tensor, dst, group=None, tag=0):
    """Sends `tensor` to global rank `dst` (which calls recv with this rank as src)."""
    if not _skip(group):
        _run(_point_to_point("send", tensor, dst, group, tag), (tensor,), False)


def recv(tensor, src, group=None, tag=0):
    """Receives into `tensor` from global rank `src`; returns src. (src=None, any sender, is
    not supported: NCCL has no such receive.)"""
    if src is None:
        raise _C.NotSupportedError("recv(): src=None (from any rank) is not supported; name the sender")
    if _skip(group):
        return -1
    _run(_point_to_point("recv", tensor, src, group, tag), (tensor,), False)
    return src


def isend(tensor, dst, group=None, tag=0):
    return None if _skip(group) else _run(_point_to_point("isend", tensor, dst, group, tag), (tensor,), True)


def irecv(tensor, src, group=None, tag=0):
    if src is None:
        raise _C.NotSupportedError("irecv(): src=None (from any rank) is not supported; name the sender")
    return None if _skip(group) else _run(_point_to_point("irecv", tensor, src, group, tag), (tensor,), True)


def _object_device(g):
    """Where objects travel as bytes: the CPU where the group has gloo, else this rank's GPU."""
    if g._backends.get("cpu"):
        return "cpu"
    from .. import cuda

    return f"rocm:{cuda.current_device()}"


def _to_bytes(obj, device):
    from .. import from_numpy

    return from_numpy(np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy()).to(device)


def _from_bytes(t, size):
    return pickle.loads(t[:size].cpu().numpy().tobytes())


def _gather_bytes(g, mine):
    """Every rank's byte tensor (padded to the longest) and its length, in rank order."""
    from .. import int64, tensor, zeros

    device = mine.device
    sizes = zeros(g.size(), dtype=int64, device=device)
    all_gather_into_tensor(sizes, tensor([mine.numel()], dtype=int64, device=device), group=g)
    sizes = sizes.tolist()
    padded = zeros(max(sizes), dtype=mine.dtype, device=device)
    padded[:mine.numel()] = mine
    out = zeros(g.size() * max(sizes), dtype=mine.dtype, device=device)
    all_gather_into_tensor(out, padded, group=g)
    return out.reshape(g.size(), max(sizes)), sizes


def all_gather_object(object_list, obj, group=None):
    """Every rank's picklable `obj` into `object_list[rank]` (pickle, so only with ranks you trust)."""
    if _skip(group):
        return
    g = _group(group, "all_gather_object")
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object(): object_list has {len(object_list)} entries; the group has "
                         f"{g.size()} ranks")
    rows, sizes = _gather_bytes(g, _to_bytes(obj, _object_device(g)))
    for r in range(g.size()):
        object_list[r] = _from_bytes(rows[r], sizes[r])


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Global rank `src`'s picklable objects into `object_list` on every rank (same length everywhere)."""
    if _skip(group):
        return
    g = _group(group, "broadcast_object_list")
    device = device or _object_device(g)
    from .. import int64, tensor, uint8, zeros

    sending = g.ranks[g.rank()] == src
    data = _to_bytes(list(object_list), device) if sending else None
    size = tensor([data.numel() if sending else 0], dtype=int64, device=device)
    broadcast(size, src=src, group=g)
    if not sending:
        data = zeros(int(size.item()), dtype=uint8, device=device)
    broadcast(data, src=src, group=g)
    objects = _from_bytes(data, data.numel())
    if len(objects) != len(object_list):
        raise ValueError(f"broadcast_object_list(): rank {src} sent {len(objects)} objects; this rank's list "
                         f"has {len(object_list)}")
    object_list[:] = objects


def barrier(group=None, async_op=False, device_ids=None):
    """Waits until every rank of the group reached it (through gloo where the group has
    it, else an all_reduce on this rank's GPU that the host waits for)."""
    if _skip(group):
        return None
    g = _group(group, "barrier")
    if g._backends.get("cpu"):
        from .. import zeros

        g._engine(zeros(1), "barrier").barrier()
        return Work() if async_op else None
    from .. import cuda, zeros

    device = device_ids[0] if device_ids else cuda.current_device()
    flag = zeros(1, device=f"rocm:{device}")
    work = Work(g._engine(flag, "barrier").all_reduce(flag.data_ptr(), 1, "float32", int(ReduceOp.SUM)), (flag,))
    work.synchronize()
    return Work() if async_op else None
