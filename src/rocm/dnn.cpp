// ROCmDNN (see pyflame/backend/rocm/dnn.h for the design): one Problem (the
// descriptors of one convolution) and three steps: choose an algorithm, size
// its workspace, run. One code path in MIOpen's names (lib_compat.h maps them
// onto cuDNN on NVIDIA); each #if is where the libraries truly differ.

#include "pyflame/backend/rocm/dnn.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <unordered_map>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/backend/rocm/tuning.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {

namespace {

// The search may try algorithms needing this much scratch memory at most.
constexpr size_t kMaxSearchWorkspace = size_t{1} << 30;

std::string library_version() {
#if defined(PYFLAME_HIP_NVIDIA)
  // cuDNN reports one number, MIOpen three.
  return "cudnn-" + std::to_string(cudnnGetVersion());
#else
  size_t major = 0, minor = 0, patch = 0;
  MIOPEN_CHECK(miopenGetVersion(&major, &minor, &patch));
  return "miopen-" + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
#endif
}

// "<architecture>|<library version>" of a device, read once: reading device
// properties costs far more than a convolution's launch, so never per call.
const std::string& device_tag(int device) {
  static std::mutex mutex;
  static std::unordered_map<int, std::string> tags;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = tags.find(device);
  if (it == tags.end()) it = tags.emplace(device, get_device_info(device).architecture + "|" + library_version()).first;
  return it->second;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s += 'x';
    s += std::to_string(x);
  }
  return s;
}

std::string join(const std::vector<int>& v) { return join(std::vector<int64_t>(v.begin(), v.end())); }

miopenDataType_t dnn_type(DType d) {
  switch (d) {
    case DType::Float16: return miopenHalf;
    case DType::BFloat16: return miopenBFloat16;
    case DType::Float64: return miopenDouble;
    default: return miopenFloat;
  }
}

// Scratch device memory for one call, returned to the cache in stream order.
class Scratch {
 public:
  Scratch(int device, hipStream_t stream, size_t bytes) : device_(device), stream_(stream) {
    if (bytes) ptr_ = get_memory_manager(device).allocate_async(bytes, stream);
  }
  ~Scratch() {
    if (ptr_) get_memory_manager(device_).deallocate_async(ptr_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }

 private:
  int device_;
  hipStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace

void throw_dnn_error(miopenStatus_t status, const char* call, const char* file, int line) {
  std::string msg = std::string(PF_DNN_LIBRARY " error ") + miopenGetErrorString(status) + " in " + call + " at " +
                    file + ":" + std::to_string(line);
  if (status == miopenStatusAllocFailed) throw ROCmMemoryError(msg);
  if (status == miopenStatusUnsupportedOp) throw NotSupportedError(msg);
  throw ROCmError(msg);
}

ConvParams ConvParams::Conv2D(int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
                              int groups) {
  return ConvParams{{pad_h, pad_w}, {stride_h, stride_w}, {dilation_h, dilation_w}, groups};
}

// The descriptors of one convolution and its tuning-cache key.
struct ROCmDNN::Problem {
  DType dtype;
  std::vector<int64_t> x_shape, w_shape, y_shape;
  std::string key;
  miopenTensorDescriptor_t x = nullptr, y = nullptr;
  dnnWeightDescriptor_t w = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;

  Problem(int device, DType dt, const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
          const std::vector<int64_t>& ys, const ConvParams& p)
      : dtype(dt), x_shape(xs), w_shape(ws), y_shape(ys) {
    PF_CHECK(xs.size() == 4 && ws.size() == 4 && ys.size() == 4 && p.padding.size() == 2 && p.stride.size() == 2 &&
                 p.dilation.size() == 2,
             ValueError, "ROCmDNN::conv2d_forward: needs 4-D input, weight and output shapes and 2 entries each of "
             "padding, stride and dilation");
    for (const auto* s : {&xs, &ws, &ys})
      for (int64_t d : *s)
        PF_CHECK(d > 0 && d <= INT32_MAX, NotSupportedError, "ROCmDNN::conv2d_forward: dimension ", d,
                 " is out of the DNN library's range (1 to 2^31-1)");
    PF_CHECK(p.groups >= 1 && xs[1] == ws[1] * p.groups && ws[0] % p.groups == 0, ValueError,
             "ROCmDNN::conv2d_forward: input ", Shape(xs), " and weight ", Shape(ws), " do not agree for groups=",
             p.groups, " (input channels must be weight.shape[1] * groups, out channels a multiple of groups)");
    std::vector<int64_t> expect = {xs[0], ws[0], 0, 0};
    for (int d = 0; d < 2; ++d) {
      PF_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0, ValueError,
               "ROCmDNN::conv2d_forward: stride and dilation must be >= 1 and padding >= 0");
      expect[2 + d] = (xs[2 + d] + 2 * p.padding[d] - p.dilation[d] * (ws[2 + d] - 1) - 1) / p.stride[d] + 1;
    }
    PF_CHECK(ys == expect, ValueError, "ROCmDNN::conv2d_forward: output shape ", Shape(ys), " should be ",
             Shape(expect), " for input ", Shape(xs), " and weight ", Shape(ws));
    const bool tf32 = dt == DType::Float32 && conv_allow_tf32();
    key = std::string("conv2d_fwd|") + dtype_name(dt) + "|x" + join(xs) + "|w" + join(ws) + "|y" + join(ys) + "|p" +
          join(p.padding) + "|s" + join(p.stride) + "|d" + join(p.dilation) + "|g" + std::to_string(p.groups) +
          (tf32 ? "|tf32" : "|fp32") + "|" + device_tag(device);
    auto i = [](int64_t v) { return static_cast<int>(v); };
#if !defined(PYFLAME_HIP_NVIDIA)
    // cuDNN convolves float64; MIOpen does not.
    PF_CHECK(dt != DType::Float64, NotSupportedError,
             "conv2d: MIOpen has no float64 convolution; convert to float32 or run on the CPU");
#endif
    const miopenDataType_t t = dnn_type(dt);
    MIOPEN_CHECK(miopenCreateTensorDescriptor(&x));
    MIOPEN_CHECK(miopenCreateTensorDescriptor(&y));
    MIOPEN_CHECK(dnnCreateWeightDescriptor(&w));
    MIOPEN_CHECK(miopenCreateConvolutionDescriptor(&conv));
    MIOPEN_CHECK(miopenSet4dTensorDescriptor(x, t, i(xs[0]), i(xs[1]), i(xs[2]), i(xs[3])));
    MIOPEN_CHECK(miopenSet4dTensorDescriptor(y, t, i(ys[0]), i(ys[1]), i(ys[2]), i(ys[3])));
    MIOPEN_CHECK(dnnSet4dWeightDescriptor(w, t, i(ws[0]), i(ws[1]), i(ws[2]), i(ws[3])));
    MIOPEN_CHECK(dnnInitConvolution2dDescriptor(conv, p.padding[0], p.padding[1], p.stride[0], p.stride[1],
                                                p.dilation[0], p.dilation[1],
                                                dt == DType::Float64 ? miopenDouble : miopenFloat));
    MIOPEN_CHECK(miopenSetConvolutionGroupCount(conv, p.groups));
#if defined(PYFLAME_HIP_NVIDIA)
    // cuDNN's math type picks tensor cores (as PyTorch: for half types; TF32 for
    // float32 only when allowed); MIOpen has no such switch.
    cudnnMathType_t math = dt == DType::Float16 || dt == DType::BFloat16 ? CUDNN_TENSOR_OP_MATH
                           : dt == DType::Float32 && !tf32             ? CUDNN_FMA_MATH
                                                                       : CUDNN_DEFAULT_MATH;
    MIOPEN_CHECK(cudnnSetConvolutionMathType(conv, math));
#endif
  }

  ~Problem() {
    if (conv) (void)miopenDestroyConvolutionDescriptor(conv);
    if (w) (void)dnnDestroyWeightDescriptor(w);
    if (y) (void)miopenDestroyTensorDescriptor(y);
    if (x) (void)miopenDestroyTensorDescriptor(x);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  size_t bytes(const std::vector<int64_t>& shape) const {
    size_t n = itemsize(dtype);
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

ROCmDNN::ROCmDNN() {
  HIP_CHECK(hipGetDevice(&device_));
  MIOPEN_CHECK(miopenCreate(&handle_));
}

ROCmDNN::~ROCmDNN() {
  DeviceGuard guard(device_);
  (void)miopenDestroy(handle_);
}

void ROCmDNN::set_stream(hipStream_t stream) {
  MIOPEN_CHECK(miopenSetStream(handle_, stream));
  stream_ = stream;
}

ROCmDNN::Choice ROCmDNN::choose(const Problem& p) {
  MIOpenTuningCache& cache = get_tuning_cache();
  if (auto hit = cache.lookup(p.key)) return {hit->algo, hit->workspace, hit->math_type};
  Choice choice{-1, 0, 0};
#if defined(PYFLAME_HIP_NVIDIA)
  // The searches differ: cuDNN times every algorithm (Find) or ranks them by
  // heuristics (Get); MIOpen's Find does both, by its exhaustive flag.
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  if (cache.exhaustive_search()) {
    // Time every algorithm on scratch buffers, within a workspace limit.
    size_t ws_bytes = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t s = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(handle_, p.x, p.w, p.conv, p.y,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(a), &s) == CUDNN_STATUS_SUCCESS)
        ws_bytes = std::max(ws_bytes, std::min(s, kMaxSearchWorkspace));
    }
    Scratch x(device_, stream_, p.bytes(p.x_shape)), w(device_, stream_, p.bytes(p.w_shape)),
        y(device_, stream_, p.bytes(p.y_shape)), ws(device_, stream_, ws_bytes);
    MIOPEN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle_, p.x, x.get(), p.w, w.get(), p.conv, p.y, y.get(),
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws.get(),
                                                        ws_bytes));
  } else {
    MIOPEN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.x, p.w, p.conv, p.y,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
  }
  for (int r = 0; r < returned && choice.algo < 0; ++r)
    if (perf[r].status == CUDNN_STATUS_SUCCESS)
      choice = {static_cast<int>(perf[r].algo), perf[r].memory, static_cast<int>(perf[r].mathType)};
#else
  size_t ws_bytes = 0;
  MIOPEN_CHECK(miopenConvolutionForwardGetWorkSpaceSize(handle_, p.w, p.x, p.conv, p.y, &ws_bytes));
  ws_bytes = std::min(ws_bytes, kMaxSearchWorkspace);
  Scratch x(device_, stream_, p.bytes(p.x_shape)), w(device_, stream_, p.bytes(p.w_shape)),
      y(device_, stream_, p.bytes(p.y_shape)), ws(device_, stream_, ws_bytes);
  miopenConvAlgoPerf_t perf[4];
  int returned = 0;
  MIOPEN_CHECK(miopenFindConvolutionForwardAlgorithm(handle_, p.x, x.get(), p.w, w.get(), p.conv, p.y, y.get(), 4,
                                                     &returned, perf, ws.get(), ws_bytes,
                                                     cache.exhaustive_search()));
  if (returned > 0) choice = {static_cast<int>(perf[0].fwd_algo), perf[0].memory, 0};
#endif
  PF_CHECK(choice.algo >= 0, NotSupportedError, "conv2d: the DNN library has no algorithm for input ",
           Shape(p.x_shape), ", weight ", Shape(p.w_shape), " (", dtype_name(p.dtype), ")");
  cache.insert(p.key, {choice.algo, choice.workspace, choice.math_type});
  return choice;
}

size_t ROCmDNN::conv2d_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                              const std::vector<int64_t>& weight_shape,
                                              const std::vector<int64_t>& output_shape, const ConvParams& params) {
  DeviceGuard guard(device_);
  Problem p(device_, dtype, input_shape, weight_shape, output_shape, params);
  return choose(p).workspace;
}

void ROCmDNN::run_forward(const Problem& p, const Choice& c, const void* input, const void* weight, void* output,
                          void* workspace, size_t workspace_size) {
  PF_CHECK(workspace_size >= c.workspace, ValueError, "ROCmDNN::conv2d_forward: the algorithm needs a workspace of ",
           c.workspace, " bytes, got ", workspace_size, " (ask conv2d_forward_workspace_size)");
  const float one32 = 1.0f, zero32 = 0.0f;
  const double one64 = 1.0, zero64 = 0.0;
  const bool f64 = p.dtype == DType::Float64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
#if defined(PYFLAME_HIP_NVIDIA)
  // cuDNN runs with the math type the algorithm was timed with (as PyTorch does).
  MIOPEN_CHECK(cudnnSetConvolutionMathType(p.conv, static_cast<cudnnMathType_t>(c.math_type)));
#endif
  MIOPEN_CHECK(miopenConvolutionForward(handle_, alpha, p.x, input, p.w, weight, p.conv,
                                        static_cast<miopenConvFwdAlgorithm_t>(c.algo), beta, p.y, output, workspace,
                                        workspace_size));
}

void ROCmDNN::conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                             const std::vector<int64_t>& weight_shape, const void* weight,
                             const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                             void* workspace, size_t workspace_size) {
  DeviceGuard guard(device_);
  Problem p(device_, dtype, input_shape, weight_shape, output_shape, params);
  run_forward(p, choose(p), input, weight, output, workspace, workspace_size);
}

void ROCmDNN::conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                             const std::vector<int64_t>& weight_shape, const void* weight,
                             const std::vector<int64_t>& output_shape, void* output, const ConvParams& params) {
  DeviceGuard guard(device_);
  Problem p(device_, dtype, input_shape, weight_shape, output_shape, params);
  const Choice c = choose(p);
  Scratch workspace(device_, stream_, c.workspace);
  run_forward(p, c, input, weight, output, workspace.get(), c.workspace);
}

namespace {
// Kept for the life of the process unless released, as the BLAS handles (see get_blas).
thread_local std::unordered_map<int, ROCmDNN*> t_dnn;
}  // namespace

ROCmDNN& get_dnn() {
  auto& per_device = t_dnn;
  int device;
  HIP_CHECK(hipGetDevice(&device));
  ROCmDNN*& dnn = per_device[device];
  if (!dnn) dnn = new ROCmDNN();
  dnn->set_stream(current_stream(device));
  return *dnn;
}

void release_dnn() {
  for (auto& [device, dnn] : t_dnn) delete dnn;
  t_dnn.clear();
}

namespace {

int as_int(int64_t v, const char* what) {
  PF_CHECK(v >= 0 && v <= INT_MAX, NotSupportedError, "conv2d: ", what, " ", v, " is out of the DNN library's range");
  return static_cast<int>(v);
}

// pf.conv2d (and conv1d, which the op layer lifts to 2-D) on the device: the
// op layer hands over contiguous NCHW input and weight and an optional bias.
// The bias is added by the elementwise kernel, as PyTorch does after cuDNN.
void conv2d_entry(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const ConvAttrs& a = call.attr<ConvAttrs>();
  ConvParams p = ConvParams::Conv2D(as_int(a.padding[0], "padding"), as_int(a.padding[1], "padding"),
                                    as_int(a.stride[0], "stride"), as_int(a.stride[1], "stride"),
                                    as_int(a.dilation[0], "dilation"), as_int(a.dilation[1], "dilation"),
                                    as_int(a.groups, "groups"));
  get_dnn().conv2d_forward(x.dtype(), x.shape(), x.data_ptr(), w.shape(), w.data_ptr(), out.shape(), out.data_ptr(),
                           p);
  if (call.inputs[2].defined()) {
    OpCall bias{ir::OpType::add, {out, call.inputs[2].view({1, out.shape()[1], 1, 1}).expand(out.shape())},
                ElementwiseAttrs{}, {out}};
    run_kernel(bias, out.device());
  }
}

PF_REGISTER_KERNEL(conv2d, ROCm, &conv2d_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
