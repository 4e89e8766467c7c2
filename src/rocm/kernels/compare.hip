// GPU kernels of the COMPARE family (binary.h has the kernels).

#include "rocm/kernels/binary.h"

namespace pyflame::backend::rocm {
namespace {

#define PF_FAMILY_COMPARE(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::All, true>));
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
