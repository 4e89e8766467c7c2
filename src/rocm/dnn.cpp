// ROCmDNN (see pyflame/backend/rocm/dnn.h for the design): one ConvProblem
// (the descriptors of one convolution in one direction, 2-D or 3-D) and three
// steps: choose an algorithm, size its workspace, run. One code path in
// MIOpen's names (lib_compat.h maps them onto cuDNN on NVIDIA); each #if is
// where the libraries truly differ.

#include "pyflame/backend/rocm/dnn.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/backend/rocm/tuning.h"
#include "rocm/device_guard.h"
#include "rocm/dnn_support.h"
#include "rocm/library_handles.h"
#include "rocm/kernels/conv.h"
#include "rocm/kernels/pool.h"

namespace pyflame::backend::rocm {

namespace {

// The search may try algorithms needing this much scratch memory at most.
constexpr size_t kMaxSearchWorkspace = size_t{1} << 30;

std::string library_version() {
#if defined(PYFLAME_HIP_NVIDIA)
  // cuDNN reports one number, MIOpen three. "+graph": the choices of the graph
  // API's search, which entries written before it (legacy algorithms) never match.
  return "cudnn-" + std::to_string(cudnnGetVersion()) + "+graph";
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

// The forward convolution reads x and w and writes y; its backward data
// (the transposed convolution) reads dy (y's shape) and w and writes dx (x's);
// its backward weights read x and dy and write dw (w's shape).
enum class ConvDirection { forward, backward_data, backward_weights };


namespace {

// The op a convolution problem runs, for messages.
const char* conv_op_name(ConvDirection direction, size_t dims) {
  const bool three_d = dims == 5;
  if (direction == ConvDirection::forward) return three_d ? "conv3d" : "conv2d";
  if (direction == ConvDirection::backward_weights) return "conv_weight_backward";
  return three_d ? "conv_transpose3d" : "conv_transpose2d";
}

// Shapes of 4 or 5 dims alike, one entry of padding, stride and dilation per
// spatial dim: what ConvKey and ConvProblem hold.
void check_conv_ranks(ConvDirection direction, const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
                      const std::vector<int64_t>& ys, const ConvParams& p) {
  const size_t dims = xs.size(), spatial = dims - 2;
  PF_CHECK((dims == 4 || dims == 5) && ws.size() == dims && ys.size() == dims && p.padding.size() == spatial &&
               p.stride.size() == spatial && p.dilation.size() == spatial,
           ValueError, conv_op_name(direction, dims), ": needs input, weight and output of 4 or 5 dims alike and one "
           "entry of padding, stride and dilation per spatial dim; got input [", join(xs), "], weight [", join(ws),
           "], output [", join(ys), "], padding [", join(p.padding), "], stride [", join(p.stride), "], dilation [",
           join(p.dilation), "]");
}

#if defined(PYFLAME_HIP_NVIDIA)

// ---- cuDNN's graph (backend) API for the convolutions, on NVIDIA.
//
// The legacy API's algorithm enum does not reach the kernels cuDNN's graph API
// runs for the same NCHW problems (PyTorch's path, through cudnn-frontend).
// H200, cuDNN 9.19: conv2d 3x3 of 128x256x8x8 float32 (TF32) took 44 us there, 122 us by the best legacy algorithm.
//
// A problem's operation graph holds its one convolution operation on x, w and
// y as the API gives them (packed NCHW or NCDHW: the engines transpose as they
// need) and declared 16-byte aligned. The search (search_graph) takes the
// engine configurations of cuDNN's heuristics, mode INSTANT (FALLBACK where
// INSTANT has none usable), in their order; drops those that lose precision,
// as PyTorch does (engines that down-convert their inputs, and tensor-core
// engines for float32 when TF32 is off); and finalizes each into an execution
// plan, keeping plans whose workspace fits kMaxSearchWorkspace: the first, or
// with exhaustive search the fastest of the first kTimedCandidates, timed as
// the legacy search times its candidates. The plan stays on the problem, so a
// call costs a variant pack and cudnnBackendExecute. The tuning cache records
// the configuration's place in the heuristics' list and its engine, from which
// a problem made later (another instance, device or process) makes the same
// plan without timing. A problem the graph API does not support (a status of
// the NOT_SUPPORTED kind, or no usable plan) runs the legacy API as before, as
// do operands off the plans' alignment (views at an offset), with the legacy
// heuristics' algorithm (PyTorch makes a plan per alignment instead).

using BackendDescriptor = Descriptor<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor>;

// An engine configuration finalized into an execution plan, and the
// tuning-cache entry naming it.
struct CudnnPlan {
  BackendDescriptor config, plan;
  MIOpenTuningCache::Entry entry;
};

// A problem's operation graph and the plan chosen for it. Every descriptor the
// graph and plan were made of lives as long as they do (cudnn-frontend keeps
// them so too): the API does not document whether they refer to one another.
struct CudnnConv {
  BackendDescriptor x, w, y, conv, op, graph;
  std::optional<CudnnPlan> plan;
  // cuDNN's legacy ranking, for operands off the plan's alignment (made on first need).
  std::vector<MIOpenTuningCache::Entry> unaligned;
};

#endif

}  // namespace

// The descriptors of one convolution in one direction, its tuning-cache key
// and its description for messages. Shapes are the forward convolution's:
// x (N, C, spatial...), w (O, C/groups, kernel...), y (N, O, spatial...).
// Made once per problem and kept by the ROCmDNN instance (ROCmDNN::problem).
struct ConvProblem {
  ConvDirection direction;
  DType dtype;
  std::vector<int64_t> x_shape, w_shape, y_shape;
  ConvParams params;
  bool tf32;  // float32 may run as TF32 (conv_allow_tf32)
  std::string key;
  miopenTensorDescriptor_t x = nullptr, y = nullptr;
  dnnWeightDescriptor_t w = nullptr;
  miopenConvolutionDescriptor_t conv = nullptr;
#if defined(PYFLAME_HIP_NVIDIA)
  // The graph API's descriptors and plan, made by ROCmDNN::choose on first
  // need: a cache beside the descriptors above, hence mutable.
  mutable std::unique_ptr<CudnnConv> graph;
#endif

  ConvProblem(ConvDirection dir, int device, DType dt, const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
              const std::vector<int64_t>& ys, const ConvParams& p, bool allow_tf32)
      : direction(dir), dtype(dt), x_shape(xs), w_shape(ws), y_shape(ys), params(p),
        tf32(dt == DType::Float32 && allow_tf32) {
    check_conv_ranks(dir, xs, ws, ys, p);
    const size_t spatial = xs.size() - 2;
    for (const auto* s : {&xs, &ws, &ys}) {
      int64_t numel = 1;
      for (int64_t d : *s) {
        PF_CHECK(d > 0, NotSupportedError, op(), ": the DNN library takes no empty dimension; got ", describe());
        PF_CHECK(d <= INT32_MAX / numel, NotSupportedError, op(), ": ", Shape(*s),
                 " has more than 2^31-1 elements, the DNN library's limit per tensor; got ", describe());
        numel *= d;
      }
    }
    PF_CHECK(p.groups >= 1 && xs[1] == ws[1] * p.groups && ws[0] % p.groups == 0, ValueError, op(),
             ": the channels do not agree for groups=", p.groups, " (x channels must be weight.shape[1] * groups, "
             "weight.shape[0] a multiple of groups); got ", describe());
    std::vector<int64_t> expect = {xs[0], ws[0]};
    for (size_t d = 0; d < spatial; ++d) {
      PF_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0, ValueError, op(),
               ": stride and dilation must be >= 1 and padding >= 0; got ", describe());
      expect.push_back((xs[2 + d] + 2 * p.padding[d] - p.dilation[d] * (ws[2 + d] - 1) - 1) / p.stride[d] + 1);
    }
    PF_CHECK(ys == expect, ValueError, op(), ": the forward convolution of ", Shape(xs), " by ", Shape(ws),
             " has shape ", Shape(expect), ", not ", Shape(ys), "; got ", describe());
#if !defined(PYFLAME_HIP_NVIDIA)
    // cuDNN convolves float64; MIOpen does not.
    PF_CHECK(dt != DType::Float64, NotSupportedError, op(),
             ": MIOpen has no float64 convolution; convert to float32 or run on the CPU");
#endif
    const char* kind = dir == ConvDirection::forward         ? "conv_fwd|"
                       : dir == ConvDirection::backward_data ? "conv_bwd_data|"
                                                             : "conv_bwd_weights|";
    key = std::string(kind) + dtype_name(dt) + "|x" +
          join(xs) + "|w" + join(ws) + "|y" + join(ys) + "|p" + join(p.padding) + "|s" + join(p.stride) + "|d" +
          join(p.dilation) + "|g" + std::to_string(p.groups) + (tf32 ? "|tf32" : "|fp32") + "|" +
          device_tag(device);
    try {
      describe_to_library();
    } catch (...) {
      destroy_descriptors();  // the destructor does not run when the constructor throws
      throw;
    }
  }

  ~ConvProblem() { destroy_descriptors(); }
  ConvProblem(const ConvProblem&) = delete;
  ConvProblem& operator=(const ConvProblem&) = delete;

  // The op the problem runs, for messages.
  const char* op() const { return conv_op_name(direction, x_shape.size()); }

  // The problem in the op's terms: the transposed convolution's input is dy, its output dx.
  std::string describe() const {
    const std::string tail = "], padding [" + join(params.padding) + "], stride [" + join(params.stride) +
                             "], dilation [" + join(params.dilation) + "], groups " + std::to_string(params.groups) +
                             ", " + dtype_name(dtype);
    if (direction == ConvDirection::backward_weights)
      return std::string(op()) + " of input [" + join(x_shape) + "] and grad_output [" + join(y_shape) +
             "] into weight [" + join(w_shape) + tail;
    const bool forward = direction == ConvDirection::forward;
    return std::string(op()) + " of input [" + join(forward ? x_shape : y_shape) + "] by weight [" + join(w_shape) +
           "] into output [" + join(forward ? y_shape : x_shape) + tail;
  }

  void check(miopenStatus_t status, const char* call, const char* file, int line) const {
    if (status != miopenStatusSuccess) throw_dnn_error(status, (describe() + ": " + call).c_str(), file, line);
  }

  size_t bytes(const std::vector<int64_t>& shape) const {
    size_t n = itemsize(dtype);
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }

 private:
  // Creates and sets the descriptors: packed (N, C, spatial...) tensors, the
  // weight in the same layout, the convolution and its group count.
  void describe_to_library() {
    const miopenDataType_t t = dnn_type(dtype);
    const int dims = static_cast<int>(x_shape.size());
    auto sizes = [](const std::vector<int64_t>& shape) { return std::vector<int>(shape.begin(), shape.end()); };
    auto packed_strides = [](const std::vector<int>& size) {
      std::vector<int> stride(size.size(), 1);
      for (size_t d = size.size() - 1; d > 0; --d) stride[d - 1] = stride[d] * size[d];
      return stride;
    };
    const std::vector<int> xs = sizes(x_shape), ws = sizes(w_shape), ys = sizes(y_shape);
    DNN_CHECK_FOR(*this, miopenCreateTensorDescriptor(&x));
    DNN_CHECK_FOR(*this, miopenCreateTensorDescriptor(&y));
    DNN_CHECK_FOR(*this, dnnCreateWeightDescriptor(&w));
    DNN_CHECK_FOR(*this, miopenCreateConvolutionDescriptor(&conv));
    DNN_CHECK_FOR(*this, miopenSetTensorDescriptor(x, t, dims, xs.data(), packed_strides(xs).data()));
    DNN_CHECK_FOR(*this, miopenSetTensorDescriptor(y, t, dims, ys.data(), packed_strides(ys).data()));
    DNN_CHECK_FOR(*this, dnnSetWeightDescriptor(w, t, dims, ws.data(), packed_strides(ws).data()));
    DNN_CHECK_FOR(*this, dnnInitConvolutionNdDescriptor(conv, dims - 2, params.padding.data(), params.stride.data(),
                                                         params.dilation.data(),
                                                         dtype == DType::Float64 ? miopenDouble : miopenFloat));
    DNN_CHECK_FOR(*this, miopenSetConvolutionGroupCount(conv, params.groups));
#if defined(PYFLAME_HIP_NVIDIA)
    // cuDNN's math type picks tensor cores (as PyTorch: for half types; TF32 for
    // float32 only when allowed); MIOpen has no such switch.
    cudnnMathType_t math = dtype == DType::Float16 || dtype == DType::BFloat16 ? CUDNN_TENSOR_OP_MATH
                           : dtype == DType::Float32 && !tf32                 ? CUDNN_FMA_MATH
                                                                               : CUDNN_DEFAULT_MATH;
    DNN_CHECK_FOR(*this, cudnnSetConvolutionMathType(conv, math));
#endif
  }

  void destroy_descriptors() {
    if (conv) (void)miopenDestroyConvolutionDescriptor(conv);
    if (w) (void)dnnDestroyWeightDescriptor(w);
    if (y) (void)miopenDestroyTensorDescriptor(y);
    if (x) (void)miopenDestroyTensorDescriptor(x);
  }
};

namespace {

// What identifies a ConvProblem, in fixed-size fields: a call builds, hashes and
// compares it (no allocation), where it used to make the whole problem, and
// destroy it after: the tuning cache's text key, the checks, and four library
// descriptors created, set and destroyed, each a library call of its own.
// tf32 is the setting's value at the call, so switching it reaches the next call.
struct ConvKey {
  ConvDirection direction;
  DType dtype;
  bool tf32;
  int dims;
  int64_t x[5], w[5], y[5];
  int padding[3], stride[3], dilation[3], groups;
  bool operator==(const ConvKey&) const = default;

  // Shapes and parameters of checked ranks (check_conv_ranks).
  ConvKey(ConvDirection dir, DType dt, bool allow_tf32, const std::vector<int64_t>& xs,
          const std::vector<int64_t>& ws, const std::vector<int64_t>& ys, const ConvParams& p)
      : direction(dir), dtype(dt), tf32(dt == DType::Float32 && allow_tf32), dims(static_cast<int>(xs.size())),
        x{}, w{}, y{}, padding{}, stride{}, dilation{}, groups(p.groups) {
    std::copy(xs.begin(), xs.end(), x), std::copy(ws.begin(), ws.end(), w), std::copy(ys.begin(), ys.end(), y);
    std::copy(p.padding.begin(), p.padding.end(), padding), std::copy(p.stride.begin(), p.stride.end(), stride);
    std::copy(p.dilation.begin(), p.dilation.end(), dilation);
  }
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    size_t h = static_cast<size_t>(k.direction) * 31 + static_cast<size_t>(k.dtype) * 7 + k.tf32;
    auto add = [&h](int64_t v) { h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    for (int d = 0; d < 5; ++d) add(k.x[d]), add(k.w[d]), add(k.y[d]);
    for (int d = 0; d < 3; ++d) add(k.padding[d]), add(k.stride[d]), add(k.dilation[d]);
    add(k.groups);
    return h;
  }
};

// Problems kept per instance at most; past that the instance starts again (a
// workload of so many shapes then makes each problem's descriptors once more).
constexpr size_t kMaxProblems = 1024;

}  // namespace

struct ROCmDNN::Problems {
  std::unordered_map<ConvKey, std::unique_ptr<ConvProblem>, ConvKeyHash> map;
};

const ConvProblem& ROCmDNN::problem(ConvDirection dir, DType dtype, const std::vector<int64_t>& xs,
                                    const std::vector<int64_t>& ws, const std::vector<int64_t>& ys,
                                    const ConvParams& params) {
  check_conv_ranks(dir, xs, ws, ys, params);
  const bool tf32 = conv_allow_tf32();
  const ConvKey key(dir, dtype, tf32, xs, ws, ys, params);
  auto it = problems_->map.find(key);
  if (it != problems_->map.end()) return *it->second;
  if (problems_->map.size() >= kMaxProblems) problems_->map.clear();
  auto p = std::make_unique<ConvProblem>(dir, device_, dtype, xs, ws, ys, params, tf32);
  return *problems_->map.emplace(key, std::move(p)).first->second;
}

namespace {

// Scratch operands and workspace for a timed search, set up so that the
// times are those of real work:
// - the operands hold finite, non-zero values (every byte 0x3C: about 1.06 in
//   float16, 0.0115 in float32 and bfloat16, 1e-18 in float64). Fresh scratch
//   memory holds whatever it held before: leftovers, zeros or, when
//   PYFLAME_POISON_ALLOCATIONS is set (the test suite), NaN; a kernel's time
//   can depend on the values (zeros draw less power, so the clock runs higher).
// - the device is idle once it is constructed: work still running on another
//   stream (the caller's, another library's such as PyTorch's) would run
//   beside the timed calls and slow whichever algorithms it overlaps.
struct SearchBuffers {
  static constexpr int kFillByte = 0x3C;

  SearchBuffers(int device, hipStream_t stream, const ConvProblem& p, size_t workspace_size)
      : x(device, stream, p.bytes(p.x_shape)),
        w(device, stream, p.bytes(p.w_shape)),
        y(device, stream, p.bytes(p.y_shape)),
        workspace(device, stream, workspace_size),
        workspace_bytes(workspace_size) {
    ROCmMemoryManager& memory = get_memory_manager(device);
    memory.memset_async(x.get(), kFillByte, p.bytes(p.x_shape), stream);
    memory.memset_async(w.get(), kFillByte, p.bytes(p.w_shape), stream);
    memory.memset_async(y.get(), kFillByte, p.bytes(p.y_shape), stream);
    synchronize();
  }

  // The operands by direction, as run_convolution takes them.
  struct Operands {
    const void* first;
    const void* second;
    void* output;
  };
  Operands operands(ConvDirection direction) const {
    const bool forward = direction == ConvDirection::forward, data = direction == ConvDirection::backward_data;
    return {data ? y.get() : x.get(), forward || data ? w.get() : y.get(),
            forward ? y.get() : data ? x.get() : w.get()};
  }

  Scratch x, w, y, workspace;
  size_t workspace_bytes;
};

// Runs `p` with the chosen algorithm on the operands by direction: forward
// (x, w) -> y, backward data (dy, w) -> dx, backward weights (x, dy) -> dw.
void run_convolution(miopenHandle_t handle, const ConvProblem& p, const MIOpenTuningCache::Entry& choice,
                     const void* first, const void* second, void* output, void* workspace, size_t workspace_size) {
  const float one32 = 1.0f, zero32 = 0.0f;
  const double one64 = 1.0, zero64 = 0.0;
  const bool f64 = p.dtype == DType::Float64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
#if defined(PYFLAME_HIP_NVIDIA)
  // cuDNN runs with the math type the algorithm was timed with (as PyTorch does).
  DNN_CHECK_FOR(p, cudnnSetConvolutionMathType(p.conv, static_cast<cudnnMathType_t>(choice.math_type)));
#endif
  switch (p.direction) {
    case ConvDirection::forward:
      DNN_CHECK_FOR(p, miopenConvolutionForward(handle, alpha, p.x, first, p.w, second, p.conv,
                                                static_cast<miopenConvFwdAlgorithm_t>(choice.algo), beta, p.y,
                                                output, workspace, workspace_size));
      break;
    case ConvDirection::backward_data:
      DNN_CHECK_FOR(p, miopenConvolutionBackwardData(handle, alpha, p.y, first, p.w, second, p.conv,
                                                     static_cast<miopenConvBwdDataAlgorithm_t>(choice.algo), beta,
                                                     p.x, output, workspace, workspace_size));
      break;
    case ConvDirection::backward_weights:
      DNN_CHECK_FOR(p, miopenConvolutionBackwardWeights(handle, alpha, p.y, second, p.x, first, p.conv,
                                                        static_cast<miopenConvBwdWeightsAlgorithm_t>(choice.algo),
                                                        beta, p.w, output, workspace, workspace_size));
      break;
  }
}

#if defined(PYFLAME_HIP_NVIDIA)

// Whether a cuDNN result keeps the problem's precision. A result may carry
// another math type than the descriptor's: cuDNN's reference says Find also
// tries CUDNN_DEFAULT_MATH, which lets float32 run as TF32 (PyTorch asserts
// FMA math for float32 without TF32 likewise). The math type allowing
// conversion (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) rounds the inputs to
// float16: PyTorch's cuDNN 9 path drops such engines (those with
// CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS).
bool keeps_precision(const ConvProblem& p, cudnnMathType_t math) {
  if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  return p.dtype != DType::Float32 || p.tf32 || math == CUDNN_FMA_MATH;
}

// cuDNN's calls of one direction, for the search: the workspace an algorithm
// needs, Find (times every algorithm) and Get (ranks them by heuristics).
template <ConvDirection> struct CudnnSearch;

template <> struct CudnnSearch<ConvDirection::forward> {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static miopenStatus_t workspace_size(miopenHandle_t h, const ConvProblem& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
  }
  static void find(miopenHandle_t h, const ConvProblem& p, const SearchBuffers& b, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnFindConvolutionForwardAlgorithmEx(h, p.x, b.x.get(), p.w, b.w.get(), p.conv, p.y,
                                                            b.y.get(), kAlgorithms, returned, perf,
                                                            b.workspace.get(), b.workspace_bytes));
  }
  static void rank(miopenHandle_t h, const ConvProblem& p, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, kAlgorithms, returned, perf));
  }
};

template <> struct CudnnSearch<ConvDirection::backward_data> {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static miopenStatus_t workspace_size(miopenHandle_t h, const ConvProblem& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.conv, p.x,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
  }
  static void find(miopenHandle_t h, const ConvProblem& p, const SearchBuffers& b, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, b.w.get(), p.y, b.y.get(), p.conv, p.x,
                                                                 b.x.get(), kAlgorithms, returned, perf,
                                                                 b.workspace.get(), b.workspace_bytes));
  }
  static void rank(miopenHandle_t h, const ConvProblem& p, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x, kAlgorithms, returned,
                                                                 perf));
  }
};

template <> struct CudnnSearch<ConvDirection::backward_weights> {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static miopenStatus_t workspace_size(miopenHandle_t h, const ConvProblem& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, p.conv, p.w,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
  static void find(miopenHandle_t h, const ConvProblem& p, const SearchBuffers& b, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x, b.x.get(), p.y, b.y.get(), p.conv, p.w,
                                                                   b.w.get(), kAlgorithms, returned, perf,
                                                                   b.workspace.get(), b.workspace_bytes));
  }
  static void rank(miopenHandle_t h, const ConvProblem& p, Perf* perf, int* returned) {
    DNN_CHECK_FOR(p, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w, kAlgorithms, returned,
                                                                   perf));
  }
};

// The first `limit` results that ran and keep the precision, in cuDNN's order
// (fastest first for Find, most promising first for Get).
template <class Perf>
std::vector<MIOpenTuningCache::Entry> usable(const ConvProblem& p, const Perf* perf, int returned, size_t limit) {
  std::vector<MIOpenTuningCache::Entry> out;
  for (int r = 0; r < returned && out.size() < limit; ++r)
    if (perf[r].status == CUDNN_STATUS_SUCCESS && keeps_precision(p, perf[r].mathType))
      out.push_back({static_cast<int>(perf[r].algo), perf[r].memory, static_cast<int>(perf[r].mathType)});
  return out;
}

// Find's order is not always the order of the algorithms' real speed: an H100
// benchmark run of conv2d 3x3 32x64x56x56 float32 chose an algorithm at 48
// TFLOP/s where other runs (and PyTorch's search in the same run) chose one
// at 80, after both Finds. Its leading candidates are timed again, each run
// once untimed and then kTimedRuns times back to back, and the fastest wins.
constexpr size_t kTimedCandidates = 3;
constexpr int kTimedRuns = 5;

// The fastest of `count` candidates: run(i) launches candidate i on `stream`.
template <class Run>
size_t fastest_of(hipStream_t stream, size_t count, const Run& run) {
  hipEvent_t start, stop;
  HIP_CHECK(hipEventCreateWithFlags(&start, hipEventDefault));
  HIP_CHECK(hipEventCreateWithFlags(&stop, hipEventDefault));
  size_t best = 0;
  float best_ms = std::numeric_limits<float>::infinity();
  for (size_t c = 0; c < count; ++c) {
    run(c);
    HIP_CHECK(hipEventRecord(start, stream));
    for (int i = 0; i < kTimedRuns; ++i) run(c);
    HIP_CHECK(hipEventRecord(stop, stream));
    HIP_CHECK(hipEventSynchronize(stop));
    float ms = 0;
    HIP_CHECK(hipEventElapsedTime(&ms, start, stop));
    if (ms < best_ms) best = c, best_ms = ms;
  }
  HIP_CHECK(hipEventDestroy(start));
  HIP_CHECK(hipEventDestroy(stop));
  return best;
}

MIOpenTuningCache::Entry fastest(miopenHandle_t handle, hipStream_t stream, const ConvProblem& p,
                                 const SearchBuffers& b, const std::vector<MIOpenTuningCache::Entry>& candidates) {
  if (candidates.size() < 2) return candidates.empty() ? MIOpenTuningCache::Entry{-1, 0, 0} : candidates[0];
  const SearchBuffers::Operands o = b.operands(p.direction);
  return candidates[fastest_of(stream, candidates.size(), [&](size_t c) {
    run_convolution(handle, p, candidates[c], o.first, o.second, o.output, b.workspace.get(), b.workspace_bytes);
  })];
}

// cuDNN's heuristic ranking of its legacy algorithms for `p`: the first `limit` usable.
template <ConvDirection direction>
std::vector<MIOpenTuningCache::Entry> rank_cudnn(miopenHandle_t handle, const ConvProblem& p, size_t limit) {
  using Search = CudnnSearch<direction>;
  typename Search::Perf perf[Search::kAlgorithms];
  int returned = 0;
  Search::rank(handle, p, perf, &returned);
  return usable(p, perf, returned, limit);
}

// The algorithm of cuDNN's search for `p` (algo -1: none usable).
template <ConvDirection direction>
MIOpenTuningCache::Entry search_cudnn(miopenHandle_t handle, int device, hipStream_t stream, const ConvProblem& p,
                                      bool exhaustive) {
  using Search = CudnnSearch<direction>;
  typename Search::Perf perf[Search::kAlgorithms];
  int returned = 0;
  if (exhaustive) {
    // Every algorithm may be timed, within a workspace limit; one that cannot
    // run the problem fails its workspace query and is left out.
    size_t workspace_bytes = 0;
    for (int a = 0; a < Search::kAlgorithms; ++a) {
      size_t s = 0;
      if (Search::workspace_size(handle, p, a, &s) == CUDNN_STATUS_SUCCESS)
        workspace_bytes = std::max(workspace_bytes, std::min(s, kMaxSearchWorkspace));
    }
    SearchBuffers buffers(device, stream, p, workspace_bytes);
    // Find twice and keep the second ranking. Find times each algorithm on its
    // own, and the first launch of a kernel in a process also loads its
    // module (CUDA loads modules lazily) or compiles it (cuDNN's runtime-
    // compiled kernels): an algorithm met for the first time can rank behind
    // slower ones already loaded, and the GPU's clock starts from idle. The
    // first Find is the warm-up of every algorithm at once; PyTorch's
    // cudnn.benchmark (cudnn_frontend's time_sorted_plan) likewise runs each
    // candidate once untimed before timing it. One H100 benchmark run chose
    // an FMA algorithm at 21 TFLOP/s for conv2d 3x3 32x64x56x56 float32,
    // where other runs chose a TF32 one at 80: this is the likely cause.
    Search::find(handle, p, buffers, perf, &returned);
    Search::find(handle, p, buffers, perf, &returned);
    return fastest(handle, stream, p, buffers, usable(p, perf, returned, kTimedCandidates));
  }
  const std::vector<MIOpenTuningCache::Entry> ranked = rank_cudnn<direction>(handle, p, 1);
  return ranked.empty() ? MIOpenTuningCache::Entry{-1, 0, 0} : ranked[0];
}

// ---- The graph API's search and runs (the design is above CudnnConv).

// Thrown where the graph API does not support a problem; the search then takes the legacy API.
struct GraphUnsupported : std::exception {};

// A graph API call for problem `p`: a status of the NOT_SUPPORTED kind throws
// GraphUnsupported, any other failure as DNN_CHECK_FOR.
void check_graph(const ConvProblem& p, cudnnStatus_t status, const char* call, const char* file, int line) {
  if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) throw GraphUnsupported();
  p.check(status, call, file, line);
}

#define GRAPH_CHECK_FOR(p, call) check_graph((p), (call), #call, __FILE__, __LINE__)

// The uids of the operands, in the graph and the variant pack.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';
// The operands' alignment the plans are made for: the caching allocator's
// blocks have more, and engines reading 16-byte vectors need it.
constexpr int64_t kPlanAlignment = 16;

// Sets a descriptor-valued attribute (the API takes an array of them).
cudnnStatus_t set_descriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                             cudnnBackendDescriptor_t value) {
  return cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

// A packed tensor of `shape` and the problem's dtype.
void make_tensor(const ConvProblem& p, BackendDescriptor& t, int64_t uid, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  const cudnnDataType_t type = dnn_type(p.dtype);
  const int64_t dims = static_cast<int64_t>(shape.size()), alignment = kPlanAlignment;
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t.out()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, shape.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, dims, strides.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  GRAPH_CHECK_FOR(p, cudnnBackendFinalize(t));
}

// The graph API's names of one direction's operation and of its operands.
struct ConvOperation {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
};

ConvOperation conv_operation(ConvDirection direction) {
  if (direction == ConvDirection::forward)
    return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
            CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
  if (direction == ConvDirection::backward_data)
    return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
}

// The operation graph of `p`: its tensors, convolution and operation of the
// problem's direction. Shapes are the forward convolution's in every direction.
std::unique_ptr<CudnnConv> make_graph(miopenHandle_t handle, const ConvProblem& p) {
  auto g = std::make_unique<CudnnConv>();
  make_tensor(p, g->x, kUidX, p.x_shape);
  make_tensor(p, g->w, kUidW, p.w_shape);
  make_tensor(p, g->y, kUidY, p.y_shape);

  // Half types accumulate in float32 (as the legacy descriptor and PyTorch), float64 in float64.
  const cudnnDataType_t compute = p.dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = static_cast<int64_t>(p.params.padding.size());
  auto int64s = [](const std::vector<int>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  const std::vector<int64_t> padding = int64s(p.params.padding), stride = int64s(p.params.stride),
                             dilation = int64s(p.params.dilation);
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, g->conv.out()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                              &compute));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
                                              1, &mode));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                                              &spatial));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64,
                                              spatial, padding.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64,
                                              spatial, padding.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
                                              spatial, stride.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial,
                                              dilation.data()));
  GRAPH_CHECK_FOR(p, cudnnBackendFinalize(g->conv));

  // Groups need no attribute: the API reads them off x's and w's channels.
  const ConvOperation a = conv_operation(p.direction);
  const float one32 = 1.0f, zero32 = 0.0f;
  const double one64 = 1.0, zero64 = 0.0;
  const bool f64 = p.dtype == DType::Float64;
  const cudnnBackendAttributeType_t scale = f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(a.type, g->op.out()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->op, a.alpha, scale, 1, alpha));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->op, a.beta, scale, 1, beta));
  GRAPH_CHECK_FOR(p, set_descriptor(g->op, a.conv, g->conv));
  GRAPH_CHECK_FOR(p, set_descriptor(g->op, a.x, g->x));
  GRAPH_CHECK_FOR(p, set_descriptor(g->op, a.w, g->w));
  GRAPH_CHECK_FOR(p, set_descriptor(g->op, a.y, g->y));
  GRAPH_CHECK_FOR(p, cudnnBackendFinalize(g->op));

  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, g->graph.out()));
  GRAPH_CHECK_FOR(p, set_descriptor(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, g->op));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                              &handle));
  GRAPH_CHECK_FOR(p, cudnnBackendFinalize(g->graph));
  return g;
}

// The engine configurations cuDNN's heuristics of `mode` propose for the graph, most promising first.
std::vector<BackendDescriptor> engine_configs(const ConvProblem& p, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics;
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, heuristics.out()));
  GRAPH_CHECK_FOR(p, set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, p.graph->graph));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  GRAPH_CHECK_FOR(p, cudnnBackendFinalize(heuristics));
  int64_t count = 0;
  GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<BackendDescriptor> configs(static_cast<size_t>(count));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (BackendDescriptor& c : configs) {
    GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, c.out()));
    raw.push_back(c);
  }
  if (count > 0)
    GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()));
  configs.resize(static_cast<size_t>(count));
  return configs;
}

// A configuration's engine: its global index, and whether its numerics keep the
// problem's precision (PyTorch's filter, less its determinism setting, which
// PyFlame does not have).
struct EngineInfo {
  int64_t index;
  bool keeps_precision;
};

EngineInfo engine_info(const ConvProblem& p, cudnnBackendDescriptor_t config) {
  BackendDescriptor engine;
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, engine.out()));
  cudnnBackendDescriptor_t raw = engine;
  int64_t count = 0;
  GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                              &count, &raw));
  EngineInfo info{-1, true};
  GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                                              &info.index));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                              CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes));
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    // Down-converting engines compute float32 (and wider) inputs in a half type;
    // tensor-core engines compute float32 as TF32.
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && p.dtype == DType::Float32 && !p.tf32))
      info.keeps_precision = false;
  }
  return info;
}

// The plan of configuration `config` (at `place` in the heuristics' list, of
// engine `engine`); none where it does not finalize (the heuristics propose
// configurations that turn out not to support the problem) or needs more
// workspace than kMaxSearchWorkspace.
std::optional<CudnnPlan> make_plan(miopenHandle_t handle, const ConvProblem& p, BackendDescriptor config, int place,
                                   int64_t engine) {
  CudnnPlan c{std::move(config), {}, {place, 0, 0, static_cast<int>(engine)}};
  GRAPH_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, c.plan.out()));
  GRAPH_CHECK_FOR(p, cudnnBackendSetAttribute(c.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  GRAPH_CHECK_FOR(p, set_descriptor(c.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, c.config));
  if (cudnnBackendFinalize(c.plan) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  int64_t workspace = 0, count = 0;
  GRAPH_CHECK_FOR(p, cudnnBackendGetAttribute(c.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                              &count, &workspace));
  if (workspace < 0 || static_cast<uint64_t>(workspace) > kMaxSearchWorkspace) return std::nullopt;
  c.entry.workspace = static_cast<size_t>(workspace);
  return c;
}

// The heuristics' modes, in the order their configurations are taken: FALLBACK
// (functional engines of no promised speed) only where INSTANT has none usable.
constexpr cudnnBackendHeurMode_t kHeuristicModes[] = {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK};

// Runs a plan of `p` on the operands by direction (as run_convolution).
void execute_plan(miopenHandle_t handle, const ConvProblem& p, cudnnBackendDescriptor_t plan, const void* first,
                  const void* second, void* output, void* workspace) {
  const bool forward = p.direction == ConvDirection::forward, data = p.direction == ConvDirection::backward_data;
  void* in1 = const_cast<void*>(first);
  void* in2 = const_cast<void*>(second);
  // x, w and y, in the order of the uids below.
  void* pointers[] = {data ? output : in1, forward || data ? in2 : output, forward ? output : data ? in1 : in2};
  const int64_t uids[] = {kUidX, kUidW, kUidY};
  BackendDescriptor pack;
  DNN_CHECK_FOR(p, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack.out()));
  DNN_CHECK_FOR(p, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids));
  DNN_CHECK_FOR(p, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                                            pointers));
  DNN_CHECK_FOR(p, cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                            &workspace));
  DNN_CHECK_FOR(p, cudnnBackendFinalize(pack));
  DNN_CHECK_FOR(p, cudnnBackendExecute(handle, plan, pack));
}

// The plan of cuDNN's graph API for `p`, kept on the problem, and its entry
// (engine -1: none usable, or the graph API does not support the problem).
MIOpenTuningCache::Entry search_graph(miopenHandle_t handle, int device, hipStream_t stream, const ConvProblem& p,
                                      bool exhaustive) {
  try {
    if (!p.graph) p.graph = make_graph(handle, p);
    const size_t wanted = exhaustive ? kTimedCandidates : 1;
    std::vector<CudnnPlan> plans;
    int first = 0;  // the place of the mode's first configuration in the heuristics' list
    for (cudnnBackendHeurMode_t mode : kHeuristicModes) {
      std::vector<BackendDescriptor> configs = engine_configs(p, mode);
      for (size_t i = 0; i < configs.size() && plans.size() < wanted; ++i) {
        const EngineInfo engine = engine_info(p, configs[i]);
        if (!engine.keeps_precision) continue;
        std::optional<CudnnPlan> plan = make_plan(handle, p, std::move(configs[i]), first + static_cast<int>(i),
                                                  engine.index);
        if (plan) plans.push_back(std::move(*plan));
      }
      if (!plans.empty()) break;
      first += static_cast<int>(configs.size());
    }
    if (plans.empty()) return {-1, 0, 0};
    size_t best = 0;
    if (plans.size() > 1) {
      size_t workspace_bytes = 0;
      for (const CudnnPlan& c : plans) workspace_bytes = std::max(workspace_bytes, c.entry.workspace);
      SearchBuffers b(device, stream, p, workspace_bytes);
      const SearchBuffers::Operands o = b.operands(p.direction);
      best = fastest_of(stream, plans.size(), [&](size_t c) {
        execute_plan(handle, p, plans[c].plan, o.first, o.second, o.output, b.workspace.get());
      });
    }
    p.graph->plan = std::move(plans[best]);
    return p.graph->plan->entry;
  } catch (const GraphUnsupported&) {
    return {-1, 0, 0};
  }
}

// Whether two graph entries name the same plan.
bool same_plan(const MIOpenTuningCache::Entry& a, const MIOpenTuningCache::Entry& b) {
  return a.algo == b.algo && a.engine == b.engine && a.workspace == b.workspace;
}

// Whether `p` holds the plan of tuning-cache entry `e`.
bool has_plan(const ConvProblem& p, const MIOpenTuningCache::Entry& e) {
  return p.graph && p.graph->plan && same_plan(p.graph->plan->entry, e);
}

// Makes the plan of a graph entry of the tuning cache again, for a problem that
// has none (the entry was read from a cache file, or chosen by another instance
// or before a new search): false where the heuristics' list no longer holds the
// entry's engine at its place, or its plan no longer finalizes with its workspace.
bool remake_plan(miopenHandle_t handle, const ConvProblem& p, const MIOpenTuningCache::Entry& e) {
  try {
    if (!p.graph) p.graph = make_graph(handle, p);
    int first = 0;
    for (cudnnBackendHeurMode_t mode : kHeuristicModes) {
      std::vector<BackendDescriptor> configs = engine_configs(p, mode);
      const size_t i = static_cast<size_t>(e.algo - first);
      if (e.algo >= first && i < configs.size()) {
        const EngineInfo engine = engine_info(p, configs[i]);
        if (engine.index != e.engine || !engine.keeps_precision) return false;
        std::optional<CudnnPlan> plan = make_plan(handle, p, std::move(configs[i]), e.algo, engine.index);
        if (!plan || !same_plan(plan->entry, e)) return false;
        p.graph->plan = std::move(*plan);
        return true;
      }
      first += static_cast<int>(configs.size());
    }
    return false;
  } catch (const GraphUnsupported&) {
    return false;
  }
}

// Whether operands fit the plans' alignment (a view at an offset may not).
bool plan_aligned(std::initializer_list<const void*> pointers) {
  for (const void* q : pointers)
    if (reinterpret_cast<uintptr_t>(q) % kPlanAlignment != 0) return false;
  return true;
}

// The legacy algorithm for operands off the alignment of `p`'s plan: the first
// of cuDNN's heuristic ranking that needs at most `workspace_limit` bytes.
MIOpenTuningCache::Entry unaligned_choice(miopenHandle_t handle, const ConvProblem& p, size_t workspace_limit) {
  std::vector<MIOpenTuningCache::Entry>& ranked = p.graph->unaligned;
  const size_t all = std::numeric_limits<size_t>::max();
  if (ranked.empty()) {
    switch (p.direction) {
      case ConvDirection::forward: ranked = rank_cudnn<ConvDirection::forward>(handle, p, all); break;
      case ConvDirection::backward_data: ranked = rank_cudnn<ConvDirection::backward_data>(handle, p, all); break;
      case ConvDirection::backward_weights:
        ranked = rank_cudnn<ConvDirection::backward_weights>(handle, p, all);
        break;
    }
  }
  for (const MIOpenTuningCache::Entry& e : ranked)
    if (e.workspace <= workspace_limit) return e;
  throw NotSupportedError(p.describe() + ": operands not " + std::to_string(kPlanAlignment) +
                          "-byte aligned run cuDNN's legacy API, which has no algorithm for them within a workspace "
                          "of " + std::to_string(workspace_limit) + " bytes");
}

#endif

}  // namespace

ROCmDNN::ROCmDNN() : problems_(std::make_unique<Problems>()) {
  HIP_CHECK(hipGetDevice(&device_));
  MIOPEN_CHECK(miopenCreate(&handle_));
}

ROCmDNN::~ROCmDNN() {
  DeviceGuard guard(device_);
  problems_.reset();
  (void)miopenDestroy(handle_);
}

void ROCmDNN::set_stream(hipStream_t stream) {
  MIOPEN_CHECK(miopenSetStream(handle_, stream));
  stream_ = stream;
}

MIOpenTuningCache::Entry ROCmDNN::choose(const ConvProblem& p) {
  MIOpenTuningCache& cache = get_tuning_cache();
  std::optional<MIOpenTuningCache::Entry> hit = cache.lookup(p.key);
#if defined(PYFLAME_HIP_NVIDIA)
  // A graph choice runs the problem's own plan, made again where the problem
  // has none for it; an entry whose plan cannot be made again is searched anew.
  if (hit && hit->engine >= 0 && !has_plan(p, *hit) && !remake_plan(handle_, p, *hit)) hit.reset();
#endif
  if (hit) return *hit;
#if defined(PYFLAME_HIP_NVIDIA)
  // float32 without TF32 asks for float32's precision: it takes the heuristics'
  // first choice untimed, as PyTorch does without cudnn.benchmark. Timing can
  // pick a configuration that loses precision with no numerical note saying so:
  // H200, cuDNN 9.19, conv2d 5x5 of 8x32x28x28 under load: the weight gradient
  // of engine 17's configuration at place 2 (18 MB workspace) erred by 6.5e-3
  // of its largest value, the heuristics' first by 6e-7.
  const bool exhaustive = cache.exhaustive_search() && !(p.dtype == DType::Float32 && !p.tf32);
  // cuDNN's graph API first (see CudnnConv), its legacy API where the graph
  // gives no plan. The legacy searches differ from MIOpen's: cuDNN times every
  // algorithm (Find) or ranks them by heuristics (Get), with calls of its own
  // per direction; MIOpen's Find does both, by its exhaustive flag.
  MIOpenTuningCache::Entry choice = search_graph(handle_, device_, stream_, p, exhaustive);
  if (choice.engine < 0) {
    switch (p.direction) {
      case ConvDirection::forward:
        choice = search_cudnn<ConvDirection::forward>(handle_, device_, stream_, p, exhaustive);
        break;
      case ConvDirection::backward_data:
        choice = search_cudnn<ConvDirection::backward_data>(handle_, device_, stream_, p, exhaustive);
        break;
      case ConvDirection::backward_weights:
        choice = search_cudnn<ConvDirection::backward_weights>(handle_, device_, stream_, p, exhaustive);
        break;
    }
  }
#else
  const bool exhaustive = cache.exhaustive_search();
  size_t workspace_bytes = 0;
  switch (p.direction) {
    case ConvDirection::forward:
      DNN_CHECK_FOR(p, miopenConvolutionForwardGetWorkSpaceSize(handle_, p.w, p.x, p.conv, p.y, &workspace_bytes));
      break;
    case ConvDirection::backward_data:
      DNN_CHECK_FOR(p,
                    miopenConvolutionBackwardDataGetWorkSpaceSize(handle_, p.y, p.w, p.conv, p.x, &workspace_bytes));
      break;
    case ConvDirection::backward_weights:
      DNN_CHECK_FOR(
          p, miopenConvolutionBackwardWeightsGetWorkSpaceSize(handle_, p.y, p.x, p.conv, p.w, &workspace_bytes));
      break;
  }
  SearchBuffers b(device_, stream_, p, std::min(workspace_bytes, kMaxSearchWorkspace));
  miopenConvAlgoPerf_t perf[4];
  int returned = 0;
  int algo = -1;  // the fastest: MIOpen lists it first, in the perf union's member of the direction
  switch (p.direction) {
    case ConvDirection::forward:
      DNN_CHECK_FOR(p, miopenFindConvolutionForwardAlgorithm(handle_, p.x, b.x.get(), p.w, b.w.get(), p.conv, p.y,
                                                             b.y.get(), 4, &returned, perf, b.workspace.get(),
                                                             b.workspace_bytes, exhaustive));
      if (returned > 0) algo = static_cast<int>(perf[0].fwd_algo);
      break;
    case ConvDirection::backward_data:
      DNN_CHECK_FOR(p, miopenFindConvolutionBackwardDataAlgorithm(handle_, p.y, b.y.get(), p.w, b.w.get(), p.conv,
                                                                  p.x, b.x.get(), 4, &returned, perf,
                                                                  b.workspace.get(), b.workspace_bytes, exhaustive));
      if (returned > 0) algo = static_cast<int>(perf[0].bwd_data_algo);
      break;
    case ConvDirection::backward_weights:
      DNN_CHECK_FOR(p, miopenFindConvolutionBackwardWeightsAlgorithm(handle_, p.y, b.y.get(), p.x, b.x.get(), p.conv,
                                                                     p.w, b.w.get(), 4, &returned, perf,
                                                                     b.workspace.get(), b.workspace_bytes,
                                                                     exhaustive));
      if (returned > 0) algo = static_cast<int>(perf[0].bwd_weights_algo);
      break;
  }
  const MIOpenTuningCache::Entry choice{algo, returned > 0 ? perf[0].memory : 0, 0};
#endif
  PF_CHECK(choice.algo >= 0, NotSupportedError, p.op(), ": the DNN library has no algorithm for ", p.describe());
  cache.insert(p.key, choice);
  return choice;
}

// The operands by direction: forward (x, w) -> y, backward data (dy, w) -> dx,
// backward weights (x, dy) -> dw.
void ROCmDNN::run(const ConvProblem& p, const MIOpenTuningCache::Entry& choice, const void* first,
                  const void* second, void* output, void* workspace, size_t workspace_size) {
  PF_CHECK(workspace_size >= choice.workspace, ValueError, p.op(), ": the algorithm needs a workspace of ",
           choice.workspace, " bytes, got ", workspace_size, " (ask ",
           p.direction == ConvDirection::forward ? "conv_forward_workspace_size" : "conv_backward_data_workspace_size",
           ")");
#if defined(PYFLAME_HIP_NVIDIA)
  if (choice.engine >= 0) {
    if (plan_aligned({first, second, output, workspace}))
      execute_plan(handle_, p, p.graph->plan->plan, first, second, output, workspace);
    else
      run_convolution(handle_, p, unaligned_choice(handle_, p, workspace_size), first, second, output, workspace,
                      workspace_size);
    return;
  }
#endif
  run_convolution(handle_, p, choice, first, second, output, workspace, workspace_size);
}

void ROCmDNN::run(const ConvProblem& p, const MIOpenTuningCache::Entry& choice, const void* first,
                  const void* second, void* output) {
  size_t bytes = choice.workspace;
#if defined(PYFLAME_HIP_NVIDIA)
  // Operands off the plan's alignment run a legacy algorithm, which may need
  // more (the scratch workspace itself is aligned).
  if (choice.engine >= 0 && !plan_aligned({first, second, output}))
    bytes = std::max(bytes, unaligned_choice(handle_, p, std::numeric_limits<size_t>::max()).workspace);
#endif
  Scratch workspace(device_, stream_, bytes);
  run(p, choice, first, second, output, workspace.get(), bytes);
}

void ROCmDNN::conv_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                           const std::vector<int64_t>& weight_shape, const void* weight,
                           const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                           void* workspace, size_t workspace_size) {
  DeviceGuard guard(device_);
  const ConvProblem& p = problem(ConvDirection::forward, dtype, input_shape, weight_shape, output_shape, params);
  run(p, choose(p), input, weight, output, workspace, workspace_size);
}

void ROCmDNN::conv_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                           const std::vector<int64_t>& weight_shape, const void* weight,
                           const std::vector<int64_t>& output_shape, void* output, const ConvParams& params) {
  DeviceGuard guard(device_);
  const ConvProblem& p = problem(ConvDirection::forward, dtype, input_shape, weight_shape, output_shape, params);
  run(p, choose(p), input, weight, output);
}

namespace {
void check_2d(const char* fn, const std::vector<int64_t>& input_shape, const std::vector<int64_t>& weight_shape,
              const std::vector<int64_t>& output_shape) {
  PF_CHECK(input_shape.size() == 4 && weight_shape.size() == 4 && output_shape.size() == 4, ValueError, "ROCmDNN::",
           fn, ": expects 4-D (N, C, H, W) shapes, got input ", Shape(input_shape), ", weight ", Shape(weight_shape),
           ", output ", Shape(output_shape), " (conv_forward takes 3-D problems too)");
}
}  // namespace

void ROCmDNN::conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                             const std::vector<int64_t>& weight_shape, const void* weight,
                             const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                             void* workspace, size_t workspace_size) {
  check_2d("conv2d_forward", input_shape, weight_shape, output_shape);
  conv_forward(dtype, input_shape, input, weight_shape, weight, output_shape, output, params, workspace,
               workspace_size);
}

size_t ROCmDNN::conv2d_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                              const std::vector<int64_t>& weight_shape,
                                              const std::vector<int64_t>& output_shape, const ConvParams& params) {
  check_2d("conv2d_forward_workspace_size", input_shape, weight_shape, output_shape);
  return conv_forward_workspace_size(dtype, input_shape, weight_shape, output_shape, params);
}

size_t ROCmDNN::conv_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                            const std::vector<int64_t>& weight_shape,
                                            const std::vector<int64_t>& output_shape, const ConvParams& params) {
  DeviceGuard guard(device_);
  const ConvProblem& p = problem(ConvDirection::forward, dtype, input_shape, weight_shape, output_shape, params);
  return choose(p).workspace;
}

void ROCmDNN::conv_backward_data(DType dtype, const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                                 const std::vector<int64_t>& weight_shape, const void* weight,
                                 const std::vector<int64_t>& grad_input_shape, void* grad_input,
                                 const ConvParams& params, void* workspace, size_t workspace_size) {
  DeviceGuard guard(device_);
  const ConvProblem& p =
      problem(ConvDirection::backward_data, dtype, grad_input_shape, weight_shape, grad_output_shape, params);
  run(p, choose(p), grad_output, weight, grad_input, workspace, workspace_size);
}

void ROCmDNN::conv_backward_data(DType dtype, const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                                 const std::vector<int64_t>& weight_shape, const void* weight,
                                 const std::vector<int64_t>& grad_input_shape, void* grad_input,
                                 const ConvParams& params) {
  DeviceGuard guard(device_);
  const ConvProblem& p =
      problem(ConvDirection::backward_data, dtype, grad_input_shape, weight_shape, grad_output_shape, params);
  run(p, choose(p), grad_output, weight, grad_input);
}

size_t ROCmDNN::conv_backward_data_workspace_size(DType dtype, const std::vector<int64_t>& grad_output_shape,
                                                  const std::vector<int64_t>& weight_shape,
                                                  const std::vector<int64_t>& grad_input_shape,
                                                  const ConvParams& params) {
  DeviceGuard guard(device_);
  const ConvProblem& p =
      problem(ConvDirection::backward_data, dtype, grad_input_shape, weight_shape, grad_output_shape, params);
  return choose(p).workspace;
}

void ROCmDNN::conv_backward_weights(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                                    const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                                    const std::vector<int64_t>& grad_weight_shape, void* grad_weight,
                                    const ConvParams& params) {
  DeviceGuard guard(device_);
  const ConvProblem& p =
      problem(ConvDirection::backward_weights, dtype, input_shape, grad_weight_shape, grad_output_shape, params);
  run(p, choose(p), input, grad_output, grad_weight);
}

ROCmDNN& get_dnn() { return LibraryHandles<ROCmDNN>::get(); }

void release_dnn() { LibraryHandles<ROCmDNN>::release(); }

namespace {

int as_int(ir::OpType op, const char* what, int64_t v) {
  PF_CHECK(v >= 0 && v <= INT_MAX, NotSupportedError, op_name(op), ": ", what, " ", v,
           " is out of the DNN library's range");
  return static_cast<int>(v);
}

// The op's attributes as the DNN library takes them.
ConvParams dnn_params(ir::OpType op, const ConvAttrs& a) {
  auto ints = [&](const char* what, const std::vector<int64_t>& v) {
    std::vector<int> out;
    for (int64_t x : v) out.push_back(as_int(op, what, x));
    return out;
  };
  return {ints("padding", a.padding), ints("stride", a.stride), ints("dilation", a.dilation),
          as_int(op, "groups", a.groups)};
}

// pf.conv2d and conv3d (and conv1d, which the op layer lifts to 2-D) on the
// device: the op layer hands over contiguous (N, C, spatial...) input and
// weight and an optional bias.
void conv_entry(OpCall& call) {
  if (!dnn_enabled()) return conv_gemm_entry(call);
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  if (w.shape()[1] == 0) {
    out.fill_(Scalar(0.0));  // no input channels: empty sums (the libraries take no empty dimension)
  } else {
    get_dnn().conv_forward(x.dtype(), x.shape(), x.data_ptr(), w.shape(), w.data_ptr(), out.shape(), out.data_ptr(),
                           dnn_params(call.op, call.attr<ConvAttrs>()));
  }
  add_conv_bias(call);
}

// The transposed convolution's input as the backward data needs it. The
// output (dx) is described with its full size, output_padding included; the
// libraries relate it to the input (dy) through the forward convolution's
// output size, floor((output + 2 padding - span) / stride) + 1, which gives
// back the input's size while output_padding < stride. PyTorch's cuDNN
// conv_transpose2d relies on this, and MIOpen's own transposed mode computes
// its output so, allowing output padding only below the stride. A larger
// output_padding (allowed below the dilation; PyTorch then leaves cuDNN for
// its own kernel) gives floor(output_padding / stride) more positions per
// dim: the input is copied into a zero-padded one of that size, whose zeros
// add nothing to the output.
Tensor transposed_input(const Tensor& x, const ConvAttrs& a) {
  Shape padded = x.shape();
  for (size_t d = 0; d < a.output_padding.size(); ++d) padded[2 + d] += a.output_padding[d] / a.stride[d];
  if (padded == x.shape()) return x;
  Tensor grad_output = Tensor::empty(padded, x.dtype(), x.device());
  grad_output.fill_(Scalar(0.0));
  Tensor inner = grad_output;
  for (size_t d = 0; d < a.output_padding.size(); ++d) inner = inner.slice(2 + d, 0, x.shape()[2 + d], 1);
  inner.copy_(x);
  return grad_output;
}

// pf.conv_transpose2d on the device: the backward data of the convolution
// with the same weight, (C_in, C_out / groups, kH, kW), which is the forward
// convolution's (O, C / groups, kH, kW) from C_out to C_in channels. The op
// layer hands over contiguous (N, C_in, H, W) input and weight and an
// optional bias.
void conv_transpose_entry(OpCall& call) {
  if (!dnn_enabled()) return conv_transpose_gemm_entry(call);
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const ConvAttrs& a = call.attr<ConvAttrs>();
  if (w.shape()[0] == 0) {
    out.fill_(Scalar(0.0));  // no input channels: empty sums (the libraries take no empty dimension)
  } else {
    const Tensor grad_output = transposed_input(x, a);
    get_dnn().conv_backward_data(x.dtype(), grad_output.shape(), grad_output.data_ptr(), w.shape(), w.data_ptr(),
                                 out.shape(), out.data_ptr(), dnn_params(call.op, a));
  }
  add_conv_bias(call);
}

// pf.conv_weight_backward on the device: the op layer hands over contiguous
// (N, C, spatial...) input and (N, O, spatial...) grad_output; the weight
// (inputs[2]) gives the result's shape only.
void conv_weight_backward_entry(OpCall& call) {
  if (!dnn_enabled()) return conv_weight_backward_gemm_entry(call);
  const Tensor& x = call.inputs[0];
  const Tensor& g = call.inputs[1];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  if (x.numel() == 0 || g.numel() == 0) {
    out.fill_(Scalar(0.0));  // empty sums (the libraries take no empty dimension)
    return;
  }
  get_dnn().conv_backward_weights(x.dtype(), x.shape(), x.data_ptr(), g.shape(), g.data_ptr(), out.shape(),
                                  out.data_ptr(), dnn_params(call.op, call.attr<ConvAttrs>()));
}

// avg_pool2d through the library, which is the faster there: on the H100,
// cuDNN's 2x2 average pooling of 64x64x112x112 float32 ran at 2.46 TB/s and
// pool.hip's kernel at 1.93 TB/s (rocm_benchmark.py --dnn); max pooling stays
// with pool.hip (3x3/2: 1.32x cuDNN's speed). float32 only, the type measured;
// a ceil_mode that adds a window stays with pool.hip (the libraries round down).
bool dnn_avg_pool2d(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.out();
  const PoolAttrs& a = call.attr<PoolAttrs>();
  if (!dnn_enabled() || x.dtype() != DType::Float32 || x.dim() != 4 || a.divisor_override != 0 ||
      x.numel() > INT_MAX)
    return false;
  PoolParams p;
  p.count_include_pad = a.count_include_pad;
  for (int d = 0; d < 2; ++d) {
    if (!a.dilation.empty() && a.dilation[d] != 1) return false;
    const int64_t k = a.kernel_size[d], pad = a.padding[d], s = a.stride[d];
    if ((x.shape()[2 + d] + 2 * pad - k) / s + 1 != out.shape()[2 + d]) return false;
    p.kernel_size.push_back(static_cast<int>(k));
    p.padding.push_back(static_cast<int>(pad));
    p.stride.push_back(static_cast<int>(s));
  }
  get_dnn().pooling2d_forward(ir::OpType::avg_pool2d, x.dtype(), x.shape(), x.data_ptr(), out.shape(),
                              call.out().data_ptr(), p);
  return true;
}

const bool g_dnn_pool_hooks = (g_dnn_avg_pool2d = &dnn_avg_pool2d, true);

PF_REGISTER_KERNEL(conv2d, ROCm, &conv_entry);
PF_REGISTER_KERNEL(conv3d, ROCm, &conv_entry);
PF_REGISTER_KERNEL(conv_transpose2d, ROCm, &conv_transpose_entry);
PF_REGISTER_KERNEL(conv_weight_backward, ROCm, &conv_weight_backward_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
