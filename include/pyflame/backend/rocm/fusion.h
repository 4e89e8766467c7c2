#pragma once
// Seed 000's names for the fusion patterns, in the backend's namespace: the graph
// IR's (pyflame/ir/fusion.h), which graph mode's fusion pass asks.

#include "pyflame/ir/fusion.h"

namespace pyflame::backend::rocm {

using ir::can_fuse;
using ir::FusedOpType;

}  // namespace pyflame::backend::rocm
