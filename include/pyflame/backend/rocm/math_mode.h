#pragma once
// Precision permissions the BLAS and DNN adapters read, as PyTorch's
// torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32.
// TF32 (NVIDIA Ampere and newer) multiplies float32 with a 10-bit mantissa,
// accumulating in float32: several times faster, about 1e-3 relative error.
// rocBLAS and MIOpen have no TF32 mode, so on AMD float32 stays full precision.
//
//   matmul: off by default; set_allow_tf32(true) or PYFLAME_ALLOW_TF32=1.
//   conv:   on by default;  set_conv_allow_tf32(false) or PYFLAME_CONV_ALLOW_TF32=0.
//
// And whether convolutions use the DNN library (MIOpen / cuDNN) where it is
// built in, as torch.backends.cudnn.enabled: off, they run as im2col + BLAS
// (rocm/kernels/conv.hip), the path of an AMD machine without MIOpen.
//   dnn:    on by default;  set_dnn_enabled(false) or PYFLAME_DNN_ENABLED=0.

#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

PF_API void set_allow_tf32(bool allow);
PF_API bool allow_tf32();
PF_API void set_conv_allow_tf32(bool allow);
PF_API bool conv_allow_tf32();
PF_API void set_dnn_enabled(bool enabled);
PF_API bool dnn_enabled();

}  // namespace pyflame::backend::rocm
