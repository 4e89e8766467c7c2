#pragma once
// What pyflame.distributed's backends (gloo on the CPU, NCCL/RCCL on the GPU) share.

namespace pyflame::distributed {

// torch.distributed.ReduceOp's, in pyflame.distributed.ReduceOp's order (its values cross
// the bindings as integers).
enum class ReduceOp { Sum, Avg, Product, Min, Max };

}  // namespace pyflame::distributed
