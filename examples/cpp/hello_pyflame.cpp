// A two-layer MLP forward pass with PyFlame's C++ API.
#include <cstdio>

#include "pyflame/backend/rocm/device.h"
#include "pyflame/ops.h"

int main() {
  using namespace pyflame;
  namespace rocm = pyflame::backend::rocm;
  if (rocm::is_available()) set_current_device(Device::rocm(0));
  else std::printf("ROCm not available (%s); using the CPU\n", rocm::unavailable_reason().c_str());

  manual_seed(0);
  Tensor x = randn({32, 784});
  Tensor w1 = mul(randn({784, 256}), Scalar(0.05));
  Tensor w2 = mul(randn({256, 10}), Scalar(0.05));
  Tensor logits = matmul(relu(matmul(x, w1)), w2);
  Tensor probs = softmax(logits, -1);
  Tensor row_sums = sum(probs, {1});
  std::printf("logits %s, probability rows sum to %.6f (first row)\n", logits.to_string().c_str(),
              row_sums.to(Device::cpu()).data<float>()[0]);
  std::printf("argmax of the first row: %lld\n",
              static_cast<long long>(argmax(logits, 1).to(Device::cpu()).data<int64_t>()[0]));
  return 0;
}
