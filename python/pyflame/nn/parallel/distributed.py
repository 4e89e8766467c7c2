"""DistributedDataParallel, as torch.nn.parallel.DistributedDataParallel.

Every rank holds a replica of the module and runs it on its share of the batch; the
gradients are averaged over the ranks during backward, so each rank's optimizer takes the
same step. At construction the replicas take rank 0's parameters and buffers (broadcast).

Buckets: the parameters, in reverse order of registration (roughly the order backward
reaches them), are packed into buckets of at most `bucket_cap_mb` (the first of at most
1 MiB; one dtype and device each), each with one flat tensor. When backward has accumulated a parameter's .grad, a
hook copies it into its bucket; when a bucket is complete, its all-reduce (AVG) starts
asynchronously, so the communication of late layers overlaps the backward of earlier
ones. When the backward pass ends (an engine callback) every bucket is waited for and
the averaged gradients are copied back into .grad.

A parameter that gets no gradient in an iteration leaves its bucket incomplete: with
find_unused_parameters=True its share counts as zeros; without it the callback raises, as
PyTorch does, rather than step with gradients that are not averaged.
"""

import contextlib
import weakref

from ... import _C
from ... import distributed as dist
from ..module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024


class _Bucket:
    def __init__(self, params):
        from ... import empty

        self.params = params
        self.flat = empty(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
        # Each parameter's slice of the flat tensor, shaped as the parameter (made once: hooks run every step).
        self.views, offset = [], 0
        for p in params:
            self.views.append(self.flat[offset:offset + p.numel()].view(tuple(p.shape)))
            offset += p.numel()
        self.reset()

    def reset(self):
        self.ready = set()
        self.work = None


class _Reducer:
    """The buckets and the per-iteration state; the hooks hold it through a weak reference."""

    def __init__(self, params, group, bucket_bytes, find_unused):
        self.group = group
        self.find_unused = find_unused
        self.buckets = []
        current, size = [], 0
        for p in reversed(params):
            # The first bucket is small (1 MiB, as PyTorch's), so that communication starts early.
            cap = min(bucket_bytes, _FIRST_BUCKET_BYTES) if not self.buckets else bucket_bytes
            if current and (size + p.numel() * p.element_size() > cap or p.dtype != current[0].dtype
                            or p.device != current[0].device):
                self.buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += p.numel() * p.element_size()
        if current:
            self.buckets.append(_Bucket(current))
        self.where = {}  # id(param) -> (bucket, index)
        for b in self.buckets:
            for i, p in enumerate(b.params):
                self.where[id(p)] = (b, i)
        self.enabled = True  # False inside no_sync()
        self.finishing = False
        self.handles = []
        me = weakref.ref(self)
        for p in params:
            self.handles.append((p, p._register_grad_accumulated_hook(_make_hook(me, id(p)))))

    def grad_ready(self, key, grad):
        if not self.finishing:
            self.finishing = True
            _C._queue_backward_callback(_make_finish(weakref.ref(self)))
        bucket, i = self.where[key]
        bucket.views[i].copy_(grad)
        bucket.ready.add(i)
        if len(bucket.ready) == len(bucket.params):
            self.start(bucket)

    def start(self, bucket):
        bucket.work = dist.all_reduce(bucket.flat, op=dist.ReduceOp.AVG, group=self.group, async_op=True)

    def finish(self):
        self.finishing = False
        incomplete = [b for b in self.buckets if b.work is None]
        if incomplete and not self.find_unused:
            for b in self.buckets:
                if b.work is not None:
                    b.work.wait()
                b.reset()
            missing = sum(len(b.params) - len(b.ready) for b in incomplete)
            raise RuntimeError(
                f"DistributedDataParallel: {missing} parameter(s) received no gradient in this backward pass, so their "
                "gradients cannot be averaged across ranks; pass find_unused_parameters=True to the constructor when "
                "some parameters do not take part in the loss")
        for b in incomplete:  # unused parameters count as zero gradients
            for i in range(len(b.params)):
                if i not in b.ready:
                    b.views[i].zero_()
            self.start(b)
        for b in self.buckets:
            b.work.wait()
            for i, p in enumerate(b.params):
                if p.grad is None:
                    p.grad = b.views[i].clone()
                else:
                    p.grad.copy_(b.views[i])
            b.reset()

    def remove(self):
        for p, handle in self.handles:
            p._remove_hook(handle)
        self.handles = []


def _make_hook(reducer_ref, key):
    def hook(grad):
        reducer = reducer_ref()
        if reducer is not None and reducer.enabled:
            reducer.grad_ready(key, grad)
    return hook


def _make_finish(reducer_ref):
    def finish():
        reducer = reducer_ref()
        if reducer is not None:
            reducer.finish()
    return finish


class DistributedDataParallel(Module):
    """Data-parallel training over the ranks of `process_group` (the default group when
    None). `device_ids`: [the one device] of the module (a GPU module), or None; every
    parameter must already be there. `bucket_cap_mb`: the size of the gradient buckets
    whose all-reduces overlap backward. `broadcast_buffers`: rank 0's buffers (BatchNorm's
    running statistics) are copied to every rank before each forward, as PyTorch."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False):
        super().__init__()
        if dim != 0:
            raise ValueError("DistributedDataParallel: only dim=0 (the batch) is supported")
        self.module = module
        group = process_group if process_group is not None else dist.GroupMember.WORLD
        self.process_group = group
        params = [p for p in module.parameters() if p.requires_grad]
        if device_ids is not None:
            if len(device_ids) != 1:
                raise ValueError(f"DistributedDataParallel: device_ids must name one device, got {device_ids}")
            want = device_ids[0]
            want = f"rocm:{want}" if isinstance(want, int) else str(want)
            wrong = [p for p in params if p.device != want]
            if wrong:
                raise ValueError(f"DistributedDataParallel: device_ids={device_ids} but a parameter is on "
                                 f"'{wrong[0].device}'; move the module with .to() first")
        self.device_ids = device_ids
        self.broadcast_buffers = broadcast_buffers
        self._source = (group.ranks if group is not None else list(range(dist.get_world_size())))[0]
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.detach(), src=self._source, group=group)
        self.reducer = _Reducer(params, group, int(bucket_cap_mb * 1024 * 1024), find_unused_parameters)

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            for b in self.module.buffers():
                dist.broadcast(b.detach(), src=self._source, group=self.process_group)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally, unaveraged; the first backward
        after it averages everything accumulated (gradient accumulation)."""
        previous = self.reducer.enabled
        self.reducer.enabled = False
        try:
            yield
        finally:
            self.reducer.enabled = previous

    def __del__(self):
        reducer = self.__dict__.get("reducer")
        if reducer is not None:
            reducer.remove()
