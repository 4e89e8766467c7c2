// GPU kernels of the BINARY_FLOAT and BINARY_INT families (binary.h has the kernels).

#include "rocm/kernels/binary.h"

namespace pyflame::backend::rocm {
namespace {

#define PF_FAMILY_BINARY_FLOAT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::FloatOnly, false>));
#define PF_FAMILY_BINARY_INT(name, F) PF_REGISTER_KERNEL(name, ROCm, (&binary_entry<kernels::F, DTypeSet::IntegerOrBool, false>));
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
