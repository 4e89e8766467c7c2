"""Several processes training together, as torch.distributed: process groups, collectives
(NCCL/RCCL for GPU tensors, gloo for CPU tensors) and the launcher
(`python -m pyflame.distributed.run`, torchrun's flags). See docs/distributed.md.

    import pyflame.distributed as dist
    dist.init_process_group("nccl")          # MASTER_ADDR, RANK, ... from the launcher
    x = pf.ones(4, device=f"rocm:{int(os.environ['LOCAL_RANK'])}")
    dist.all_reduce(x)                        # the sum over every rank, on every rank
"""

from .process_group import (
    Backend,
    DistBackendError,
    DistError,
    GroupMember,
    ProcessGroup,
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    irecv,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    isend,
    new_group,
    recv,
    reduce_scatter_tensor,
    send,
)
from .store import DistStoreError, DistTimeoutError, PrefixStore, TCPStore

__all__ = [
    "Backend",
    "DistBackendError",
    "DistError",
    "DistStoreError",
    "DistTimeoutError",
    "GroupMember",
    "PrefixStore",
    "ProcessGroup",
    "ReduceOp",
    "TCPStore",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "is_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "isend",
    "new_group",
    "recv",
    "reduce_scatter_tensor",
    "send",
]
