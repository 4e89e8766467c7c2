// The vendor-library adapters on a real GPU: ROCmBLAS (gemm, strided batched
// gemm, geam, the GEMM with a fused bias), ROCmDNN (2-D convolution forward and backward data with their
// workspaces; pooling, batch norm, activation, softmax and reduction), the
// tuning cache and the ROCBLAS_CHECK / MIOPEN_CHECK errors. References are
// plain loops on the host in double, or for the ops that have them the
// project's own GPU kernels (pf ops); outputs are poisoned before the library
// writes them.
// Skips (with the reason) when no GPU is usable.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "pyflame/backend/rocm/blas.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/dnn.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/tuning.h"
#include "pyflame/ops.h"

namespace rocm = pyflame::backend::rocm;

namespace {

bool gpu_or_skip() {
  if (rocm::is_available()) return true;
  MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
  return false;
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// A device copy of host data, freed with the object.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : bytes(n * sizeof(float)), ptr(rocm::get_memory_manager().allocate(bytes)) {
    rocm::get_memory_manager().memset(ptr, 0xFF, bytes);  // NaN poison
  }
  explicit DeviceBuffer(const std::vector<float>& host) : DeviceBuffer(host.size()) {
    rocm::get_memory_manager().copy_host_to_device(ptr, host.data(), bytes);
  }
  ~DeviceBuffer() { rocm::get_memory_manager().deallocate(ptr); }
  std::vector<float> host() const {
    std::vector<float> out(bytes / sizeof(float));
    rocm::get_memory_manager().copy_device_to_host(out.data(), ptr, bytes);
    return out;
  }
  float* f() const { return static_cast<float*>(ptr); }
  size_t bytes;
  void* ptr;
};

// Column-major C (m x n) = op(A) op(B), as BLAS defines it, in double.
std::vector<double> ref_gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb) {
  std::vector<double> c(size_t(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += double(ta ? a[p + i * lda] : a[i + p * lda]) * (tb ? b[j + p * ldb] : b[p + j * ldb]);
      c[i + size_t(j) * m] = acc;
    }
  return c;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("ROCmBLAS gemm matches a host reference for every transpose combination") {
  if (!gpu_or_skip()) return;
  rocm::set_allow_tf32(false);
  const int m = 37, n = 29, k = 53;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 1, ldc = m + 2;
      auto a = random_floats(size_t(lda) * (ta ? m : k), 1 + ta), b = random_floats(size_t(ldb) * (tb ? k : n), 3 + tb);
      DeviceBuffer da(a), db(b), dc(size_t(ldc) * n);
      rocm::get_blas().gemm(ta ? rocblas_operation_transpose : rocblas_operation_none,
                            tb ? rocblas_operation_transpose : rocblas_operation_none, m, n, k, 1.0f, da.f(), lda, db.f(),
                            ldb, 0.0f, dc.f(), ldc);
      auto c = dc.host();
      std::vector<float> c_packed;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) c_packed.push_back(c[i + size_t(j) * ldc]);
      check_close(c_packed, ref_gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb), 1e-5);
    }
}

TEST_CASE("ROCmBLAS gemm_strided_batched and geam") {
  if (!gpu_or_skip()) return;
  rocm::set_allow_tf32(false);
  const int m = 16, n = 9, k = 11, batch = 5;
  auto a = random_floats(size_t(m) * k * batch, 7), b = random_floats(size_t(k) * n * batch, 8);
  DeviceBuffer da(a), db(b), dc(size_t(m) * n * batch);
  rocm::get_blas().gemm_strided_batched(rocblas_operation_none, rocblas_operation_none, m, n, k, 1.0f, da.f(), m,
                                        int64_t(m) * k, db.f(), k, int64_t(k) * n, 0.0f, dc.f(), m, int64_t(m) * n,
                                        batch);
  auto c = dc.host();
  for (int i = 0; i < batch; ++i) {
    auto want = ref_gemm(false, false, m, n, k, a.data() + size_t(i) * m * k, m, b.data() + size_t(i) * k * n, k);
    check_close(std::vector<float>(c.begin() + size_t(i) * m * n, c.begin() + size_t(i + 1) * m * n), want, 1e-5);
  }

  // geam: C = 2 A^T - B  (A is n x m, so A^T is m x n)
  auto ga = random_floats(size_t(n) * m, 9), gb = random_floats(size_t(m) * n, 10);
  DeviceBuffer dga(ga), dgb(gb), dgc(size_t(m) * n);
  rocm::get_blas().geam(rocblas_operation_transpose, rocblas_operation_none, m, n, 2.0f, dga.f(), n, -1.0f, dgb.f(), m,
                        dgc.f(), m);
  auto gc = dgc.host();
  std::vector<double> want(size_t(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) want[i + size_t(j) * m] = 2.0 * ga[j + size_t(i) * n] - gb[i + size_t(j) * m];
  check_close(gc, want, 1e-6);
}

TEST_CASE("ROCmBLAS try_gemm_bias adds the bias (and ReLU) in the GEMM (always on NVIDIA), or declines and writes nothing") {
  if (!gpu_or_skip()) return;
  rocm::set_allow_tf32(false);
  const bool nvidia = rocm::get_device_info(rocm::get_current_device()).platform == "nvidia";
  const int m = 37, n = 29, k = 53;
  auto bias = random_floats(m, 9);
  DeviceBuffer dbias(bias);
  for (bool relu : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 1, ldc = m + 2;
        auto a = random_floats(size_t(lda) * (ta ? m : k), 5 + ta);
        auto b = random_floats(size_t(ldb) * (tb ? k : n), 7 + tb);
        DeviceBuffer da(a), db(b), dc(size_t(ldc) * n);
        for (int call = 0; call < 2; ++call) {  // the second call runs the kept plan
          const bool fused = rocm::get_blas().try_gemm_bias(
              "test", pyflame::DType::Float32, ta ? rocblas_operation_transpose : rocblas_operation_none,
              tb ? rocblas_operation_transpose : rocblas_operation_none, m, n, k, da.f(), lda, db.f(), ldb, dbias.f(),
              relu, dc.f(), ldc, false);
          if (nvidia) CHECK(fused);  // cuBLASLt's epilogue; on AMD hipBLASLt's where built in, else none
          auto c = dc.host();
          std::vector<float> c_packed;
          for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) c_packed.push_back(c[i + size_t(j) * ldc]);
          if (fused) {
            std::vector<double> want = ref_gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb);
            for (int j = 0; j < n; ++j)
              for (int i = 0; i < m; ++i) {
                double& v = want[i + size_t(j) * m];
                v += bias[i];
                if (relu) v = std::max(v, 0.0);
              }
            check_close(c_packed, want, 1e-5);
          } else {
            for (float v : c_packed) REQUIRE(std::isnan(v));  // still the poison
          }
        }
      }
  // A dimension of 1 is left to the caller's GEMM on every platform.
  DeviceBuffer da(k), db(size_t(k) * n), dc(n);
  CHECK_FALSE(rocm::get_blas().try_gemm_bias("test", pyflame::DType::Float32, rocblas_operation_none,
                                             rocblas_operation_none, 1, n, k, da.f(), 1, db.f(), k, dbias.f(), false,
                                             dc.f(), 1, false));
}

TEST_CASE("ROCBLAS_CHECK names the library status, the call, file and line") {
  if (!gpu_or_skip()) return;
  DeviceBuffer d(64);
  try {
    // lda smaller than the row count is invalid for every BLAS.
    rocm::get_blas().gemm(rocblas_operation_none, rocblas_operation_none, 8, 8, 8, 1.0f, d.f(), 2, d.f(), 8, 0.0f,
                          d.f(), 8);
    FAIL("an invalid leading dimension was accepted");
  } catch (const pyflame::ROCmError& e) {
    std::string msg = e.what();
    CHECK(msg.find("BLAS error") != std::string::npos);
    CHECK(msg.find("blas.cpp:") != std::string::npos);
    CHECK((msg.find("cublasGemmEx") != std::string::npos || msg.find("rocblas_gemm_ex") != std::string::npos));
  }
}

namespace {

// Calls f(x index, w index, y index) for every product of the NCHW
// cross-correlation y = conv(x, w), as torch.nn.functional.conv2d.
template <class F>
void for_each_conv2d_product(const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
                             const std::vector<int64_t>& ys, const rocm::ConvParams& p, const F& f) {
  const int64_t cg = ws[1], og = ws[0] / p.groups;
  for (int64_t nn = 0; nn < ys[0]; ++nn)
    for (int64_t o = 0; o < ys[1]; ++o)
      for (int64_t i = 0; i < ys[2]; ++i)
        for (int64_t j = 0; j < ys[3]; ++j)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t u = 0; u < ws[2]; ++u)
              for (int64_t v = 0; v < ws[3]; ++v) {
                int64_t h = i * p.stride[0] - p.padding[0] + u * p.dilation[0];
                int64_t q = j * p.stride[1] - p.padding[1] + v * p.dilation[1];
                if (h < 0 || h >= xs[2] || q < 0 || q >= xs[3]) continue;
                f(((nn * xs[1] + o / og * cg + c) * xs[2] + h) * xs[3] + q, ((o * cg + c) * ws[2] + u) * ws[3] + v,
                  ((nn * ys[1] + o) * ys[2] + i) * ys[3] + j);
              }
}

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

// The output shape of conv(x, w) in 2-D.
std::vector<int64_t> conv2d_output_shape(const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
                                         const rocm::ConvParams& p) {
  std::vector<int64_t> ys = {xs[0], ws[0]};
  for (int d = 0; d < 2; ++d)
    ys.push_back((xs[2 + d] + 2 * p.padding[d] - p.dilation[d] * (ws[2 + d] - 1) - 1) / p.stride[d] + 1);
  return ys;
}

}  // namespace

TEST_CASE("ROCmDNN conv2d_forward matches a host reference (stride, padding, dilation, groups)") {
  if (!gpu_or_skip()) return;
  rocm::set_conv_allow_tf32(false);
  struct Case {
    std::vector<int64_t> xs, ws;
    rocm::ConvParams p;
  };
  const Case cases[] = {
      {{2, 3, 7, 7}, {4, 3, 3, 3}, rocm::ConvParams::Conv2D(1, 1)},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, rocm::ConvParams::Conv2D(0, 1, 2, 1, 1, 2, 2)},
      {{3, 6, 5, 6}, {6, 1, 3, 3}, rocm::ConvParams::Conv2D(2, 2, 1, 2, 2, 1, 6)},  // depthwise
  };
  for (const Case& c : cases) {
    const std::vector<int64_t> ys = conv2d_output_shape(c.xs, c.ws, c.p);
    auto x = random_floats(numel(c.xs), 11);
    auto w = random_floats(numel(c.ws), 12);
    DeviceBuffer dx(x), dw(w), dy(numel(ys));
    rocm::ROCmDNN& dnn = rocm::get_dnn();
    // The spec's 2-D names (seed 000), which run conv_forward.
    size_t ws_bytes = dnn.conv2d_forward_workspace_size(pyflame::DType::Float32, c.xs, c.ws, ys, c.p);
    void* ws = ws_bytes ? rocm::get_memory_manager().allocate(ws_bytes) : nullptr;
    dnn.conv2d_forward(pyflame::DType::Float32, c.xs, dx.ptr, c.ws, dw.ptr, ys, dy.ptr, c.p, ws, ws_bytes);
    if (ws) rocm::get_memory_manager().deallocate(ws);
    std::vector<double> want(numel(ys));
    for_each_conv2d_product(c.xs, c.ws, ys, c.p, [&](int64_t xi, int64_t wi, int64_t yi) {
      want[yi] += double(x[xi]) * w[wi];
    });
    check_close(dy.host(), want, 1e-4);
  }
}

TEST_CASE("ROCmDNN conv_backward_data is the transposed convolution (groups, dilation, output_padding)") {
  if (!gpu_or_skip()) return;
  rocm::set_conv_allow_tf32(false);
  // grad_input shapes one larger than the smallest (a transposed
  // convolution's output_padding) where the stride allows it.
  struct Case {
    std::vector<int64_t> dys, ws, dxs;
    rocm::ConvParams p;
  };
  const Case cases[] = {
      {{2, 4, 5, 5}, {4, 3, 3, 3}, {2, 3, 7, 7}, rocm::ConvParams::Conv2D(0, 0)},
      {{1, 4, 4, 5}, {4, 2, 3, 3}, {1, 2, 8, 10}, rocm::ConvParams::Conv2D(1, 1, 2, 2)},
      {{3, 4, 3, 4}, {4, 3, 2, 3}, {3, 6, 7, 12}, rocm::ConvParams::Conv2D(0, 1, 2, 3, 1, 2, 2)},
  };
  for (const Case& c : cases) {
    REQUIRE(conv2d_output_shape(c.dxs, c.ws, c.p) == c.dys);
    auto dy = random_floats(numel(c.dys), 13);
    auto w = random_floats(numel(c.ws), 14);
    DeviceBuffer ddy(dy), dw(w), ddx(numel(c.dxs));
    rocm::ROCmDNN& dnn = rocm::get_dnn();
    size_t ws_bytes = dnn.conv_backward_data_workspace_size(pyflame::DType::Float32, c.dys, c.ws, c.dxs, c.p);
    void* ws = ws_bytes ? rocm::get_memory_manager().allocate(ws_bytes) : nullptr;
    dnn.conv_backward_data(pyflame::DType::Float32, c.dys, ddy.ptr, c.ws, dw.ptr, c.dxs, ddx.ptr, c.p, ws, ws_bytes);
    if (ws) rocm::get_memory_manager().deallocate(ws);
    std::vector<double> want(numel(c.dxs));
    for_each_conv2d_product(c.dxs, c.ws, c.dys, c.p, [&](int64_t xi, int64_t wi, int64_t yi) {
      want[xi] += double(dy[yi]) * w[wi];
    });
    check_close(ddx.host(), want, 1e-4);
  }
}

TEST_CASE("the DNN adapter rejects inconsistent problems; MIOPEN_CHECK names the status, call, file and line") {
  if (!gpu_or_skip()) return;
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  const auto p = rocm::ConvParams::Conv2D(0, 0);
  // weight channels (5) vs input channels (3); an output shape that does not follow
  CHECK_THROWS_AS(dnn.conv_forward_workspace_size(pyflame::DType::Float32, {1, 3, 8, 8}, {2, 5, 3, 3}, {1, 2, 6, 6}, p),
                  pyflame::ValueError);
  CHECK_THROWS_AS(dnn.conv_forward_workspace_size(pyflame::DType::Float32, {1, 3, 8, 8}, {2, 3, 3, 3}, {1, 2, 7, 6}, p),
                  pyflame::ValueError);
  // the spec's 2-D name refuses a 3-D problem
  CHECK_THROWS_AS(dnn.conv2d_forward_workspace_size(pyflame::DType::Float32, {1, 3, 4, 8, 8}, {2, 3, 1, 3, 3},
                                                    {1, 2, 4, 6, 6}, p),
                  pyflame::ValueError);
  const int line = __LINE__ + 2;
  try {
    MIOPEN_CHECK(static_cast<miopenStatus_t>(static_cast<int>(miopenStatusSuccess) + 1));
    FAIL("a failed status passed");
  } catch (const pyflame::ROCmError& e) {
    std::string msg = e.what();
    CHECK((msg.find("cuDNN error") != std::string::npos || msg.find("MIOpen error") != std::string::npos));
    CHECK(msg.find("static_cast<miopenStatus_t>") != std::string::npos);
    CHECK(msg.find("test_rocm_libs.cpp:" + std::to_string(line)) != std::string::npos);
  }
}

TEST_CASE("the tuning cache searches once, reuses, persists, and never reuses another GPU's entries") {
  if (!gpu_or_skip()) return;
  const std::string path = "/tmp/pyflame_tuning_test_" + std::to_string(::getpid()) + ".txt";
  std::remove(path.c_str());
  rocm::MIOpenTuningCache& cache = rocm::get_tuning_cache();
  cache.clear();
  cache.set_cache_file(path);
  const std::vector<int64_t> xs = {2, 8, 12, 12}, ws = {8, 8, 3, 3}, ys = {2, 8, 12, 12};
  const auto p = rocm::ConvParams::Conv2D(1, 1);
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  size_t w1 = dnn.conv_forward_workspace_size(pyflame::DType::Float32, xs, ws, ys, p);
  auto s1 = cache.get_stats();
  CHECK(s1.misses == 1);
  CHECK(s1.hits == 0);
  CHECK(s1.entries == 1);
  size_t w2 = dnn.conv_forward_workspace_size(pyflame::DType::Float32, xs, ws, ys, p);
  CHECK(w1 == w2);
  CHECK(cache.get_stats().hits == 1);

  // The file holds the entry, keyed with this GPU's architecture.
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  const std::string arch = rocm::get_device_info(rocm::get_current_device()).architecture;
  CHECK(line.find("|" + arch + "|") != std::string::npos);
  in.close();

  // A fresh cache reading the file reuses the choice without a search ...
  rocm::MIOpenTuningCache fresh({true, true, true, path});
  CHECK(fresh.get_stats().entries == 1);
  // ... and the same problem from another architecture is a different key.
  std::string other = line;
  other.replace(other.find("|" + arch + "|"), arch.size() + 2, "|gfx000|");
  {
    std::ofstream out(path);
    out << other << '\n';
  }
  cache.clear();
  cache.set_cache_file(path);
  CHECK(cache.get_stats().entries == 1);
  (void)dnn.conv_forward_workspace_size(pyflame::DType::Float32, xs, ws, ys, p);
  CHECK(cache.get_stats().misses == 1);  // the foreign entry did not match
  CHECK(cache.get_stats().entries == 2);
  cache.set_cache_file("");
  std::remove(path.c_str());
}

// ---- The spec's other ROCmDNN entry points against the project's own GPU
// ops (pf.max_pool2d, pf.batch_norm, pf.relu, pf.softmax, pf.sum, ...) on
// the same random inputs: the library writes into a NaN-poisoned tensor.

namespace {

namespace pf = pyflame;

pf::Device gpu() { return pf::Device::rocm(rocm::get_current_device()); }

// Uniform in [lo, hi) on the GPU.
pf::Tensor gpu_random(const pf::Shape& shape, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  pf::Tensor host = pf::Tensor::empty(shape, pf::DType::Float32, pf::Device::cpu());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = u(rng);
  return host.to(gpu());
}

pf::Tensor gpu_poisoned(const pf::Shape& shape) {
  pf::Tensor t = pf::Tensor::empty(shape, pf::DType::Float32, gpu());
  t.fill_(pf::Scalar(std::nan("")));
  return t;
}

std::vector<float> to_host(const pf::Tensor& t) {
  pf::Tensor h = t.contiguous().to(pf::Device::cpu());
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// The library's result against the project's kernel's, element by element.
void check_same(const pf::Tensor& got, const pf::Tensor& want, double tol = 1e-5) {
  REQUIRE(got.numel() == want.numel());
  const std::vector<float> g = to_host(got), w = to_host(want);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": library " << g[i] << ", kernel " << w[i]);
    REQUIRE(std::abs(double(g[i]) - w[i]) <= tol * (1 + std::abs(double(w[i]))));
  }
}

}  // namespace

TEST_CASE("ROCmDNN pooling2d_forward matches pf.max_pool2d and pf.avg_pool2d") {
  if (!gpu_or_skip()) return;
  const pf::DeviceScope on_gpu(gpu());  // the pf ops run on the current device
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  const pf::Tensor x = gpu_random({2, 3, 9, 11}, 21);
  struct Case {
    pf::ir::OpType type;
    rocm::PoolParams p;
  };
  std::vector<Case> cases = {
      {pf::ir::OpType::max_pool2d, rocm::PoolParams::Pool2D(3, 3, 1, 1, 2, 2)},
      {pf::ir::OpType::max_pool2d, rocm::PoolParams::Pool2D(2, 3, 0, 1, 1, 2)},
      {pf::ir::OpType::avg_pool2d, rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2)},
      {pf::ir::OpType::avg_pool2d, rocm::PoolParams::Pool2D(3, 3, 1, 1, 2, 2)},
      {pf::ir::OpType::avg_pool2d, rocm::PoolParams::Pool2D(3, 3, 1, 1, 2, 2)},
      // ceil_mode where it adds no window (9 and 11 are odd, kernel 3, stride 2)
      {pf::ir::OpType::max_pool2d, rocm::PoolParams::Pool2D(3, 3, 0, 0, 2, 2)},
  };
  cases[4].p.count_include_pad = false;
  cases[5].p.ceil_mode = true;
  for (const Case& c : cases) {
    const std::vector<int64_t> k(c.p.kernel_size.begin(), c.p.kernel_size.end()),
        s(c.p.stride.begin(), c.p.stride.end()), pad(c.p.padding.begin(), c.p.padding.end());
    const pf::Tensor want = c.type == pf::ir::OpType::max_pool2d
                                ? pf::max_pool2d(x, k, s, pad, {1}, c.p.ceil_mode)
                                : pf::avg_pool2d(x, k, s, pad, c.p.ceil_mode, c.p.count_include_pad);
    pf::Tensor got = gpu_poisoned(want.shape());
    INFO(pf::op_name(c.type) << " kernel " << k[0] << "x" << k[1] << " count_include_pad " << c.p.count_include_pad);
    dnn.pooling2d_forward(c.type, pf::DType::Float32, x.shape(), x.data_ptr(), got.shape(), got.data_ptr(), c.p);
    check_same(got, want);
  }
  // ceil_mode adding windows (2x2/2 of 9x11: 5x6, not 4x5), a wrong output shape, another op.
  auto ceil = rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2);
  ceil.ceil_mode = true;
  pf::Tensor out = gpu_poisoned({2, 3, 5, 6});
  CHECK_THROWS_AS(dnn.pooling2d_forward(pf::ir::OpType::max_pool2d, pf::DType::Float32, x.shape(), x.data_ptr(),
                                        out.shape(), out.data_ptr(), ceil),
                  pf::NotSupportedError);
  CHECK_THROWS_AS(dnn.pooling2d_forward(pf::ir::OpType::max_pool2d, pf::DType::Float32, x.shape(), x.data_ptr(),
                                        out.shape(), out.data_ptr(), rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2)),
                  pf::ValueError);
  CHECK_THROWS_AS(dnn.pooling2d_forward(pf::ir::OpType::relu, pf::DType::Float32, x.shape(), x.data_ptr(),
                                        out.shape(), out.data_ptr(), rocm::PoolParams::Pool2D(2, 2, 0, 0, 2, 2)),
                  pf::NotSupportedError);
}

TEST_CASE("ROCmDNN batchnorm_forward_training and _inference match pf.batch_norm") {
  if (!gpu_or_skip()) return;
  const pf::DeviceScope on_gpu(gpu());  // the pf ops run on the current device
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  const double eps = 1e-5, momentum = 0.1;
  for (const pf::Shape& shape : {pf::Shape{4, 3, 5, 6}, pf::Shape{8, 5}, pf::Shape{2, 4, 3, 2, 5}}) {
    INFO("x " << pf::detail::to_piece(shape));
    const int64_t c = shape[1];
    const pf::Tensor x = gpu_random(shape, 31, -2.0f, 3.0f);
    const pf::Tensor weight = gpu_random({c}, 32, 0.5f, 1.5f), bias = gpu_random({c}, 33);
    const pf::Tensor mean0 = gpu_random({c}, 34), var0 = gpu_random({c}, 35, 0.5f, 1.5f);

    // Training: the output, the updated running statistics, the saved batch statistics.
    pf::Tensor mean_k = mean0.clone(), var_k = var0.clone();
    const pf::Tensor want = pf::batch_norm(x, mean_k, var_k, weight, bias, true, momentum, eps);
    pf::Tensor got = gpu_poisoned(shape), mean_l = mean0.clone(), var_l = var0.clone();
    pf::Tensor saved_mean = gpu_poisoned({c}), saved_inv_var = gpu_poisoned({c});
    dnn.batchnorm_forward_training(pf::DType::Float32, shape, x.data_ptr(), got.data_ptr(), weight.data_ptr(),
                                   bias.data_ptr(), momentum, mean_l.data_ptr(), var_l.data_ptr(), eps,
                                   saved_mean.data_ptr(), saved_inv_var.data_ptr());
    check_same(got, want, 1e-4);
    check_same(mean_l, mean_k, 1e-5);
    check_same(var_l, var_k, 1e-5);
    std::vector<int64_t> reduced = {0};
    for (size_t d = 2; d < shape.size(); ++d) reduced.push_back(static_cast<int64_t>(d));
    check_same(saved_mean, pf::mean(x, reduced), 1e-5);
    const std::vector<float> var = to_host(pf::var(x, reduced, 0)), inv = to_host(saved_inv_var);
    for (int64_t i = 0; i < c; ++i) CHECK(std::abs(inv[i] - 1 / std::sqrt(var[i] + eps)) <= 1e-4 * inv[i]);

    // Inference: the running statistics normalize.
    const pf::Tensor want_eval = pf::batch_norm(x, mean0, var0, weight, bias, false, momentum, eps);
    pf::Tensor got_eval = gpu_poisoned(shape);
    dnn.batchnorm_forward_inference(pf::DType::Float32, shape, x.data_ptr(), got_eval.data_ptr(), weight.data_ptr(),
                                    bias.data_ptr(), mean0.data_ptr(), var0.data_ptr(), eps);
    check_same(got_eval, want_eval, 1e-4);
  }
  // One value per channel cannot train.
  pf::Tensor one = gpu_random({1, 3, 1, 1}, 36), w = gpu_random({3}, 37);
  CHECK_THROWS_AS(dnn.batchnorm_forward_training(pf::DType::Float32, one.shape(), one.data_ptr(), one.data_ptr(),
                                                 w.data_ptr(), w.data_ptr(), 0.1, nullptr, nullptr, 1e-5, nullptr,
                                                 nullptr),
                  pf::ValueError);
}

TEST_CASE("ROCmDNN activation_forward matches pf.relu, sigmoid, tanh and elu") {
  if (!gpu_or_skip()) return;
  const pf::DeviceScope on_gpu(gpu());  // the pf ops run on the current device
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  for (const pf::Shape& shape : {pf::Shape{3, 4, 5, 7}, pf::Shape{1001}, pf::Shape{2, 3, 1, 4, 5, 3}}) {
    const pf::Tensor x = gpu_random(shape, 41, -4.0f, 4.0f);
    struct Case {
      pf::ir::OpType type;
      float alpha;
      pf::Tensor want;
    };
    const Case cases[] = {
        {pf::ir::OpType::relu, 0.0f, pf::relu(x)},
        {pf::ir::OpType::sigmoid, 0.0f, pf::sigmoid(x)},
        {pf::ir::OpType::tanh, 0.0f, pf::tanh(x)},
        {pf::ir::OpType::elu, 1.0f, pf::elu(x)},
        {pf::ir::OpType::elu, 0.5f, pf::elu(x, {pf::Scalar(0.5)})},
    };
    for (const Case& c : cases) {
      INFO(pf::op_name(c.type) << " alpha " << c.alpha << " of " << pf::detail::to_piece(shape));
      pf::Tensor got = gpu_poisoned(shape);
      dnn.activation_forward(c.type, pf::DType::Float32, shape, x.data_ptr(), got.data_ptr(), c.alpha);
      check_same(got, c.want, 1e-5);
    }
  }
  pf::Tensor x = gpu_random({16}, 42);
  CHECK_THROWS_AS(dnn.activation_forward(pf::ir::OpType::leaky_relu, pf::DType::Float32, x.shape(), x.data_ptr(),
                                         x.data_ptr(), 0.01f),
                  pf::NotSupportedError);
}

TEST_CASE("ROCmDNN softmax_forward matches pf.softmax and pf.log_softmax along every axis") {
  if (!gpu_or_skip()) return;
  const pf::DeviceScope on_gpu(gpu());  // the pf ops run on the current device
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  const pf::Shape shape = {5, 7, 33};
  const pf::Tensor x = gpu_random(shape, 51, -6.0f, 6.0f);
  for (int axis : {-1, 1, 0}) {
    for (bool log : {false, true}) {
      INFO("axis " << axis << (log ? " log_softmax" : " softmax"));
      const pf::Tensor want = log ? pf::log_softmax(x, axis) : pf::softmax(x, axis);
      pf::Tensor got = gpu_poisoned(shape);
      dnn.softmax_forward(pf::DType::Float32, shape, x.data_ptr(), got.data_ptr(), axis, log);
      check_same(got, want, 1e-5);
    }
  }
  CHECK_THROWS_AS(dnn.softmax_forward(pf::DType::Float32, shape, x.data_ptr(), x.data_ptr(), 3), pf::ValueError);
}

TEST_CASE("ROCmDNN reduce matches pf.sum, mean, max, min and prod; its workspace query") {
  if (!gpu_or_skip()) return;
  const pf::DeviceScope on_gpu(gpu());  // the pf ops run on the current device
  rocm::ROCmDNN& dnn = rocm::get_dnn();
  const pf::Shape shape = {6, 5, 40};
  const pf::Tensor x = gpu_random(shape, 61, 0.5f, 1.5f);  // prod of 40 stays finite
  struct Case {
    pf::ir::OpType type;
    std::vector<int> dims;
    bool keepdim;
  };
  const Case cases[] = {
      {pf::ir::OpType::sum, {2}, false},   {pf::ir::OpType::sum, {}, false},     {pf::ir::OpType::mean, {0, 2}, true},
      {pf::ir::OpType::max, {-1}, false},  {pf::ir::OpType::min, {1}, true},     {pf::ir::OpType::prod, {2}, false},
      {pf::ir::OpType::max, {0, 1}, false},
  };
  for (const Case& c : cases) {
    const std::vector<int64_t> dims(c.dims.begin(), c.dims.end());
    INFO(pf::op_name(c.type) << " over " << pf::detail::to_piece(dims) << " keepdim " << c.keepdim);
    const pf::Tensor want = pf::reduce_op(c.type, x, dims, c.keepdim);
    // The spec's form, with the workspace the query asks for ...
    pf::Tensor got = gpu_poisoned(want.shape());
    const size_t bytes = dnn.reduce_workspace_size(c.type, pf::DType::Float32, shape, got.shape(), c.dims);
    void* ws = bytes ? rocm::get_memory_manager().allocate(bytes) : nullptr;
    dnn.reduce(c.type, pf::DType::Float32, shape, x.data_ptr(), got.shape(), got.data_ptr(), c.dims, ws, bytes);
    check_same(got, want, 1e-5);
    // ... and the one taking it from the caching allocator.
    pf::Tensor got2 = gpu_poisoned(want.shape());
    dnn.reduce(c.type, pf::DType::Float32, shape, x.data_ptr(), got2.shape(), got2.data_ptr(), c.dims);
    check_same(got2, want, 1e-5);
    if (ws) rocm::get_memory_manager().deallocate(ws);  // stream ordered
  }
  pf::Tensor out = gpu_poisoned({6, 40});
  CHECK_THROWS_AS(dnn.reduce(pf::ir::OpType::sum, pf::DType::Float32, shape, x.data_ptr(), out.shape(),
                             out.data_ptr(), {2}),
                  pf::ValueError);
  CHECK_THROWS_AS(dnn.reduce(pf::ir::OpType::relu, pf::DType::Float32, shape, x.data_ptr(), out.shape(),
                             out.data_ptr(), {1}),
                  pf::NotSupportedError);
}

// Last in the file: hands the library handles and workspaces back, so the
// allocator tests that follow and compute-sanitizer's leak check see none.
TEST_CASE("release the BLAS and DNN instances") {
  if (!gpu_or_skip()) return;
  rocm::release_blas();
  rocm::release_dnn();
  CHECK(rocm::get_memory_manager().get_stats().total_allocated == 0);
}
