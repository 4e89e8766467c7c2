// GPU kernels of the BINARY family (binary.h has the kernels).

#include "rocm/kernels/binary.h"

namespace pyflame::backend::rocm {
namespace {

#define PF_FAMILY_BINARY(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::All, false>));
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
