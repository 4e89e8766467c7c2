// pyflame._rocm's NCCL/RCCL communicators, for pyflame.distributed's "nccl" backend.
// Buffers cross as (address, element count, dtype name): pyflame.distributed keeps the
// tensors alive until the collective's work is waited for.

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "pyflame/backend/rocm/nccl.h"

namespace nb = nanobind;
using namespace nb::literals;
namespace rocm = pyflame::backend::rocm;

namespace pyflame::python {

namespace {
void* as_ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }
}  // namespace

void bind_nccl(nb::module_& m) {
  m.def("nccl_available", &rocm::nccl_available);
  m.def("nccl_unavailable_reason", &rocm::nccl_unavailable_reason);
  m.def("nccl_version", &rocm::nccl_version);
  m.def("nccl_unique_id", [] {
    const std::string id = rocm::nccl_unique_id();
    return nb::bytes(id.data(), id.size());
  });

  nb::class_<rocm::NcclWork>(m, "NcclWork")
      .def("is_completed", &rocm::NcclWork::is_completed)
      .def("wait", &rocm::NcclWork::wait)
      .def("synchronize", &rocm::NcclWork::synchronize, nb::call_guard<nb::gil_scoped_release>());

  using Comm = rocm::NcclCommunicator;
  using pyflame::parse_dtype;
  // Joining waits for every rank: without the GIL, so the rendezvous store's server
  // thread (in rank 0's process) goes on answering.
  nb::class_<Comm>(m, "NcclCommunicator")
      .def(
          "__init__",
          [](Comm* c, int device, int rank, int size, nb::bytes id, double timeout_s) {
            const std::string unique_id(id.c_str(), id.size());
            nb::gil_scoped_release release;
            new (c) Comm(device, rank, size, unique_id, timeout_s);
          },
          "device"_a, "rank"_a, "size"_a, "unique_id"_a, "timeout_s"_a)
      .def_prop_ro("device", &Comm::device)
      .def("all_reduce", [](Comm& c, uintptr_t data, int64_t count, const std::string& dtype, int op) {
        return c.all_reduce(as_ptr(data), count, parse_dtype(dtype), static_cast<rocm::ReduceOp>(op));
      })
      .def("broadcast", [](Comm& c, uintptr_t data, int64_t count, const std::string& dtype, int root) {
        return c.broadcast(as_ptr(data), count, parse_dtype(dtype), root);
      })
      .def("all_gather", [](Comm& c, uintptr_t out, uintptr_t in, int64_t count, const std::string& dtype) {
        return c.all_gather(as_ptr(out), as_ptr(in), count, parse_dtype(dtype));
      })
      .def("reduce_scatter",
           [](Comm& c, uintptr_t out, uintptr_t in, int64_t count, const std::string& dtype, int op) {
             return c.reduce_scatter(as_ptr(out), as_ptr(in), count, parse_dtype(dtype), static_cast<rocm::ReduceOp>(op));
           })
      .def("send", [](Comm& c, uintptr_t data, int64_t count, const std::string& dtype, int peer) {
        return c.send(as_ptr(data), count, parse_dtype(dtype), peer);
      })
      .def("recv", [](Comm& c, uintptr_t data, int64_t count, const std::string& dtype, int peer) {
        return c.recv(as_ptr(data), count, parse_dtype(dtype), peer);
      })
      .def("abort", &Comm::abort);
}

}  // namespace pyflame::python
