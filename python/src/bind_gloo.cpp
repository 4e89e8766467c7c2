// pyflame._gloo: pyflame.distributed's CPU backend (src/distributed/gloo_group.h), built
// where the system has gloo. Buffers cross as (address, element count, dtype name), reduce
// ops as pyflame.distributed.ReduceOp's integers.

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "distributed/gloo_group.h"

namespace nb = nanobind;
using namespace nb::literals;
using pyflame::parse_dtype;
using pyflame::distributed::GlooGroup;
using pyflame::distributed::ReduceOp;

namespace {
void* as_ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }
}  // namespace

// Every call runs without the GIL: collectives block on the other ranks, and joining needs
// the rendezvous store, whose server may be a thread of this very process (rank 0).
NB_MODULE(_gloo, m) {
  m.doc() = "pyflame.distributed's gloo backend";
  const auto released = nb::call_guard<nb::gil_scoped_release>();
  nb::class_<GlooGroup>(m, "GlooGroup")
      .def(
          "__init__",
          [](GlooGroup* g, int rank, int size, nb::handle store_set, nb::handle store_get, double timeout_s,
             const std::string& address) {
            // The store's functions are borrowed (alive for this call) and called with the GIL.
            const GlooGroup::StoreSet set = [store_set](const std::string& key, const std::string& value) {
              nb::gil_scoped_acquire gil;
              store_set(key, nb::bytes(value.data(), value.size()));
            };
            const GlooGroup::StoreGet get = [store_get](const std::string& key) {
              nb::gil_scoped_acquire gil;
              nb::bytes value = nb::cast<nb::bytes>(store_get(key));
              return std::string(value.c_str(), value.size());
            };
            nb::gil_scoped_release release;
            new (g) GlooGroup(rank, size, set, get, timeout_s, address);
          },
          "rank"_a, "size"_a, "store_set"_a, "store_get"_a, "timeout_s"_a, "address"_a)
      .def(
          "all_reduce",
          [](GlooGroup& g, uintptr_t data, int64_t count, const std::string& dtype, int op) {
            g.all_reduce(as_ptr(data), count, parse_dtype(dtype), static_cast<ReduceOp>(op));
          },
          released)
      .def(
          "broadcast",
          [](GlooGroup& g, uintptr_t data, int64_t count, const std::string& dtype, int root) {
            g.broadcast(as_ptr(data), count, parse_dtype(dtype), root);
          },
          released)
      .def(
          "all_gather",
          [](GlooGroup& g, uintptr_t out, uintptr_t in, int64_t count, const std::string& dtype) {
            g.all_gather(as_ptr(out), as_ptr(in), count, parse_dtype(dtype));
          },
          released)
      .def(
          "reduce_scatter",
          [](GlooGroup& g, uintptr_t out, uintptr_t in, int64_t count, const std::string& dtype, int op) {
            g.reduce_scatter(as_ptr(out), as_ptr(in), count, parse_dtype(dtype), static_cast<ReduceOp>(op));
          },
          released)
      .def(
          "send",
          [](GlooGroup& g, uintptr_t data, int64_t count, const std::string& dtype, int peer, uint32_t tag) {
            g.send(as_ptr(data), count, parse_dtype(dtype), peer, tag);
          },
          released)
      .def(
          "recv",
          [](GlooGroup& g, uintptr_t data, int64_t count, const std::string& dtype, int peer, uint32_t tag) {
            g.recv(as_ptr(data), count, parse_dtype(dtype), peer, tag);
          },
          released)
      .def("barrier", &GlooGroup::barrier, released);
}
