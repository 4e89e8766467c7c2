#pragma once
// Pooling through the DNN library where it is faster than pool.hip's kernels:
// dnn.cpp sets the hook at start-up when the DNN adapter is built (it stays
// null otherwise), and pool.hip's entry offers each call to it first.

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

// Runs `call` (an avg_pool2d) through the DNN library and returns true, or
// returns false where the library cannot or is switched off (math_mode.h).
using DnnPoolHook = bool (*)(OpCall& call);
extern DnnPoolHook g_dnn_avg_pool2d;

}  // namespace pyflame::backend::rocm
