// DLPack both ways: Tensor.__dlpack__/__dlpack_device__ for consumers
// (torch.from_dlpack, numpy.from_dlpack, CuPy, JAX) and the import of a
// DLPack capsule behind pf.from_dlpack (python/pyflame/_interop.py). No copy
// either way: an exported capsule holds a Tensor (so its storage), an imported
// tensor's storage calls the producer's deleter and holds the producer object.
//
// The structs are the DLPack 1.x ABI (dmlc/dlpack, include/dlpack/dlpack.h),
// spelled here; both the versioned capsule ('dltensor_versioned') and the
// legacy one ('dltensor') are spoken.

#include <cstring>
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "core/backend.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame::python;

namespace {

// ------------------------------------------------------------ the ABI

// Device types (DLDeviceType).
enum : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10, kDLROCMHost = 11 };
// Type codes (DLDataTypeCode).
enum : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;  // a C enum in the header: int-sized
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; nullptr: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kFlagReadOnly = 1u << 0;
constexpr uint64_t kFlagIsCopied = 1u << 1;
constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinorVersion = 1;

const char* const kVersionedName = "dltensor_versioned";
const char* const kLegacyName = "dltensor";
const char* const kUsedVersionedName = "used_dltensor_versioned";
const char* const kUsedLegacyName = "used_dltensor";

// ------------------------------------------------------------ devices and dtypes

// The DLPack device type of the GPUs: the backend is HIP, which is CUDA on NVIDIA.
int32_t gpu_device_type() {
  static const int32_t type = [] {
    pyflame::DeviceBackend* be = pyflame::backend_for(pyflame::DeviceType::ROCm);
    if (!be || be->device_count() == 0) return int32_t{kDLROCM};
    return be->device_info(0).platform == "nvidia" ? int32_t{kDLCUDA} : int32_t{kDLROCM};
  }();
  return type;
}

DLDevice dl_device_of(pyflame::Device d) {
  if (d.is_cpu()) return {kDLCPU, 0};
  return {gpu_device_type(), d.index};
}

DLDataType dl_dtype_of(DType d) {
  auto bits = static_cast<uint8_t>(pyflame::itemsize(d) * 8);
  switch (d) {
    case DType::Bool: return {kDLBool, 8, 1};
    case DType::UInt8: return {kDLUInt, 8, 1};
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return {kDLInt, bits, 1};
    case DType::BFloat16: return {kDLBfloat, 16, 1};
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return {kDLFloat, bits, 1};
  }
  throw std::logic_error("dl_dtype_of: unknown dtype");
}

// The inverse of dl_dtype_of.
DType dtype_of(DLDataType d) {
  for (int i = 0; i < pyflame::kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const DLDataType e = dl_dtype_of(t);
    if (e.code == d.code && e.bits == d.bits && e.lanes == d.lanes) return t;
  }
  throw nb::buffer_error(("from_dlpack: unsupported DLPack dtype (code " + std::to_string(d.code) + ", " +
                          std::to_string(d.bits) + " bits, " + std::to_string(d.lanes) +
                          " lanes); supported: bool, uint8, int8..int64, float16, bfloat16, float32, float64")
                             .c_str());
}

pyflame::Device device_of(DLDevice d) {
  // Pinned host memory of either runtime is host memory.
  if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost || d.device_type == kDLROCMHost)
    return pyflame::Device::cpu();
  pyflame::DeviceBackend* be = pyflame::backend_for(pyflame::DeviceType::ROCm);
  if ((d.device_type == kDLCUDA || d.device_type == kDLROCM) && be && d.device_type == gpu_device_type() &&
      d.device_id >= 0 && d.device_id < be->device_count())
    return pyflame::Device::rocm(d.device_id);
  throw nb::buffer_error(("from_dlpack: memory on DLPack device (" + std::to_string(d.device_type) + ", " +
                          std::to_string(d.device_id) + ") is not reachable here; pyflame takes CPU memory (1) and " +
                          (gpu_device_type() == kDLCUDA ? "CUDA (2)" : "ROCm (10)") + " memory of its GPUs")
                             .c_str());
}

// ------------------------------------------------------------ streams (array API)

pyflame::DeviceBackend& gpu_backend() {
  pyflame::DeviceBackend* be = pyflame::backend_for(pyflame::DeviceType::ROCm);
  if (!be || be->device_count() == 0)
    throw nb::buffer_error(("from_dlpack: GPU memory, but this pyflame has no usable GPU: " +
                            pyflame::rocm_unavailable_reason()).c_str());
  return *be;
}

// __dlpack__(stream=...) on a GPU tensor: the consumer's stream must see the
// work queued on ours. None is the default stream (CUDA: the legacy stream 1;
// ROCm: 0); -1 asks for no synchronisation.
void sync_consumer_stream(const Tensor& t, nb::handle stream) {
  int64_t s = stream.is_none() ? (gpu_device_type() == kDLCUDA ? 1 : 0) : nb::cast<int64_t>(stream);
  if (s == -1) return;
  if (gpu_device_type() == kDLCUDA)
    PF_CHECK(s != 0, ValueError, "__dlpack__: stream 0 is ambiguous on CUDA (the array API disallows it); "
             "pass 1 for the legacy default stream or 2 for the per-thread one");
  else
    PF_CHECK(s != 1 && s != 2, ValueError, "__dlpack__: streams 1 and 2 are CUDA's; on ROCm pass 0 for the "
             "default stream or a stream handle");
  PF_CHECK(s >= 0, ValueError, "__dlpack__: stream must be None, -1 or a stream handle, got ", s);
  gpu_backend().make_stream_wait(static_cast<uintptr_t>(s), t.device().index);
}

// ------------------------------------------------------------ export

struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
};

DLTensor describe(Export& e) {
  const Tensor& t = e.tensor;
  e.shape.assign(t.shape().begin(), t.shape().end());
  e.strides.assign(t.strides().begin(), t.strides().end());
  DLTensor d{};
  d.data = t.numel() == 0 ? nullptr : t.data_ptr();
  d.device = dl_device_of(t.device());
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = dl_dtype_of(t.dtype());
  d.shape = e.shape.data();
  d.strides = e.strides.data();
  d.byte_offset = 0;
  return d;
}

void capsule_destructor(PyObject* capsule) {
  // A capsule a consumer took was renamed 'used_...': its deleter is the consumer's to call.
  if (PyCapsule_IsValid(capsule, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
    if (m->deleter) m->deleter(m);
  }
}

nb::object to_dlpack(const Tensor& self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                     nb::handle copy) {
  if (self.requires_grad()) throw nb::buffer_error("Can't export tensors that require gradient, use tensor.detach()");
  std::optional<bool> want_copy;
  if (!copy.is_none()) want_copy = nb::cast<bool>(copy);
  Tensor t = self;
  if (!dl_device.is_none()) {
    auto [type, id] = nb::cast<std::pair<int32_t, int32_t>>(dl_device);
    DLDevice own = dl_device_of(self.device());
    if (type != own.device_type || id != own.device_id) {
      if (type != kDLCPU)
        throw nb::buffer_error(("__dlpack__: cannot export a tensor on " + pyflame::to_string(self.device()) +
                                " to DLPack device (" + std::to_string(type) + ", " + std::to_string(id) + ")")
                                   .c_str());
      if (want_copy == false)
        throw nb::buffer_error("__dlpack__: the tensor lives on the GPU; dl_device=(1, 0) needs copy=True or None");
      t = pyflame::to(self, pyflame::Device::cpu());  // waits for the GPU: no stream to synchronise
      want_copy = true;
    }
  }
  bool copied = want_copy == true;
  if (copied && t.same_storage(self)) t = pyflame::clone(self);
  if (!t.device().is_cpu()) sync_consumer_stream(t, stream);

  // A consumer that speaks DLPack 1.x says so; others get the legacy capsule.
  bool versioned = !max_version.is_none() && nb::cast<std::pair<uint32_t, uint32_t>>(max_version).first >= 1;
  auto* e = new Export{t, {}, {}};
  const char* name;
  void* payload;
  if (versioned) {
    e->versioned.version = {kMajorVersion, kMinorVersion};
    e->versioned.manager_ctx = e;
    e->versioned.deleter = [](DLManagedTensorVersioned* m) { delete static_cast<Export*>(m->manager_ctx); };
    e->versioned.flags = copied ? kFlagIsCopied : 0;
    e->versioned.dl_tensor = describe(*e);
    name = kVersionedName;
    payload = &e->versioned;
  } else {
    e->legacy.manager_ctx = e;
    e->legacy.deleter = [](DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); };
    e->legacy.dl_tensor = describe(*e);
    name = kLegacyName;
    payload = &e->legacy;
  }
  PyObject* capsule = PyCapsule_New(payload, name, capsule_destructor);
  if (!capsule) {
    delete e;
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// ------------------------------------------------------------ import

Tensor from_capsule(nb::handle capsule, nb::handle owner) {
  const DLTensor* dl;
  uint64_t flags = 0;
  std::function<void()> release;
  if (PyCapsule_IsValid(capsule.ptr(), kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
    if (m->version.major > kMajorVersion)
      throw nb::buffer_error(("from_dlpack: DLPack version " + std::to_string(m->version.major) + "." +
                              std::to_string(m->version.minor) + " is newer than this build speaks (1.x)").c_str());
    dl = &m->dl_tensor;
    flags = m->flags;
    release = [m] { if (m->deleter) m->deleter(m); };
    PyCapsule_SetName(capsule.ptr(), kUsedVersionedName);
  } else if (PyCapsule_IsValid(capsule.ptr(), kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kLegacyName));
    dl = &m->dl_tensor;
    release = [m] { if (m->deleter) m->deleter(m); };
    PyCapsule_SetName(capsule.ptr(), kUsedLegacyName);
  } else {
    throw pyflame::TypeError("from_dlpack: expected an object with __dlpack__ or an unused DLPack capsule "
                             "('dltensor' or 'dltensor_versioned'), got " + py_type_name(capsule));
  }
  // From here on the memory is ours to release, also when a check below fails.
  PyObject* ref = owner.ptr();
  Py_XINCREF(ref);
  auto deleter = [release, ref](void*) {
    nb::gil_scoped_acquire gil;  // deleters of Python producers touch reference counts
    release();
    Py_XDECREF(ref);
  };
  std::unique_ptr<void, decltype(deleter)> guard(reinterpret_cast<void*>(1), deleter);

  DType dtype = dtype_of(dl->dtype);
  pyflame::Device device = device_of(dl->device);
  Shape shape(dl->shape, dl->shape + dl->ndim);
  Shape strides = dl->strides ? Shape(dl->strides, dl->strides + dl->ndim) : pyflame::contiguous_strides(shape);
  int64_t span = 1;
  for (int32_t i = 0; i < dl->ndim; ++i) {
    if (shape[i] > 1 && strides[i] < 0)
      throw nb::buffer_error("from_dlpack: negative strides are not supported; pass a copy of the array");
    if (shape[i] > 0) span += (shape[i] - 1) * std::max<int64_t>(strides[i], 0);
  }
  if (pyflame::shape_numel(shape) == 0) span = 0;
  void* data = static_cast<char*>(dl->data) + dl->byte_offset;
  auto storage = std::make_shared<pyflame::Storage>(data, static_cast<size_t>(span) * pyflame::itemsize(dtype),
                                                    device, deleter);
  guard.release();
  Tensor t(storage, shape, strides, 0, dtype);
  // GPU memory stays on the GPU it came from: placed there, as torch.from_dlpack's result (host
  // memory is unplaced, as from_numpy's).
  t.set_placed(!device.is_cpu());
  // PyFlame has no read-only tensors: memory the producer marks so is copied.
  return flags & kFlagReadOnly ? pyflame::clone(t) : t;
}

}  // namespace

namespace pyflame::python {

void bind_dlpack(nb::module_& m, nb::class_<Tensor>& tensor) {
  tensor.def("__dlpack__", &to_dlpack, nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
             "dl_device"_a = nb::none(), "copy"_a = nb::none(),
             "A DLPack capsule of this tensor (no copy unless copy=True or dl_device asks for the host). "
             "stream: the consumer's stream, which is made to wait for the work queued on this tensor's device.");
  tensor.def("__dlpack_device__", [](const Tensor& t) {
    DLDevice d = dl_device_of(t.device());
    return std::make_pair(d.device_type, d.device_id);
  }, "(device type, id) as DLPack numbers them: (1, 0) for the CPU; (2, N) for GPUs on NVIDIA (kDLCUDA), "
     "(10, N) on AMD (kDLROCM).");
  m.def("_from_dlpack_capsule", &from_capsule, "capsule"_a, "owner"_a.none(),
        "The tensor of a DLPack capsule, sharing its memory; `owner` (the producer) is kept alive with it.");
  m.def("_dlpack_device", [](nb::handle device) {
    DLDevice d = dl_device_of(as_device(device));
    return std::make_pair(d.device_type, d.device_id);
  }, "device"_a, "A device ('cpu', 'rocm:N') as DLPack's (device type, id).");
  m.def("_dlpack_stream", [](int device) -> int64_t {
    auto handle = static_cast<int64_t>(gpu_backend().current_stream_handle(device));
    // A null handle is the default stream: CUDA's legacy stream is 1 in the array API, ROCm's is 0.
    return handle == 0 && gpu_device_type() == kDLCUDA ? 1 : handle;
  }, "device"_a, "The stream= a consumer on this GPU passes to a producer's __dlpack__: its current stream.");
}

}  // namespace pyflame::python
