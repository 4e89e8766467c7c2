// Creation: the factories behind python/pyflame/_creation.py (each with
// dtype= and device=; a tensor is made, and its random numbers drawn, on its
// device), random generators (pf.Generator, pf.manual_seed) and from_numpy.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <random>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/ops.h"

namespace pyflame::python {

namespace {

// Where a new tensor goes (a factory's device=): a named device, where it is placed; None,
// the current device, unplaced; a tensor (the _like factories, Tensor.new_*), that tensor's
// device and placement, as PyTorch makes them on the tensor's device.
struct Target {
  std::optional<Device> device;
  bool placed = false;
};

Target as_target(nb::handle h) {
  if (h.is_none()) return {};
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& like = nb::cast<const Tensor&>(h);
    return {like.device(), like.is_placed()};
  }
  return {as_device(h), true};
}

// Runs a factory with its target device current in this thread.
template <class F> Tensor on(nb::handle device, const F& make) {
  const Target target = as_target(device);
  pyflame::DeviceScope scope(target.device);
  Tensor t = make();
  return t.set_placed(target.placed);
}

Generator* as_generator(nb::handle h) {
  if (h.is_none()) return nullptr;
  if (!nb::isinstance<Generator>(h))
    throw pyflame::TypeError("generator must be a pyflame.Generator, got " + py_type_name(h));
  return nb::cast<Generator*>(h);
}

// A generator's state as PyTorch gives it: a uint8 tensor (here 16 bytes: the seed, then the offset).
Tensor generator_state(const Generator& g) {
  Tensor t = Tensor::empty({16}, DType::UInt8, Device::cpu());
  const uint64_t words[2] = {g.initial_seed(), g.offset()};
  std::memcpy(t.data_ptr(), words, sizeof(words));
  return t;
}

void set_generator_state(Generator& g, const Tensor& state) {
  PF_CHECK(state.dtype() == DType::UInt8 && state.numel() == 16, ValueError,
           "Generator.set_state: expected a uint8 tensor of 16 bytes (from get_state()), got ", state.dtype(), " of ",
           state.numel(), " elements");
  Tensor host = state.to(Device::cpu()).contiguous();
  uint64_t words[2];
  std::memcpy(words, host.data_ptr(), sizeof(words));
  g.set_state(words[0], words[1]);
}

// A seed as torch.manual_seed takes it: -2**63 <= seed < 2**64, negative seeds wrapping modulo 2**64.
uint64_t as_seed(nb::handle seed) {
  if (!PyIndex_Check(seed.ptr()) || PyBool_Check(seed.ptr()))
    throw pyflame::TypeError("manual_seed: seed must be an int, got " + py_type_name(seed));
  nb::int_ v(seed);
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow == 0) return static_cast<uint64_t>(s);
  unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(v.ptr()) : 0;
  if (overflow < 0 || (u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
    PyErr_Clear();
    throw pyflame::ValueError("Overflow when unpacking long long: a seed must be in [-2**63, 2**64)");
  }
  return u;
}

}  // namespace

void bind_creation(nb::module_& m) {
  nb::class_<Generator>(m, "Generator",
                        "A random number generator: a seed and the number of draws made. The numbers depend only on "
                        "them, not on the device, so one generator serves every device.")
      .def("__init__", [](Generator* g, nb::handle device) {
        if (!device.is_none()) as_device(device);  // checked, as PyTorch's; the draws are the same on every device
        new (g) Generator();
      }, "device"_a = nb::none())
      .def("manual_seed", [](nb::handle self, nb::handle seed) {
        nb::cast<Generator&>(self).manual_seed(as_seed(seed));
        return nb::borrow(self);
      }, "seed"_a, "Seeds the generator (the draws start again) and returns it.")
      .def("seed", [](Generator& g) {
        uint64_t s = (static_cast<uint64_t>(std::random_device()()) << 32) | std::random_device()();
        g.manual_seed(s);
        return s;
      }, "Seeds the generator from the operating system's entropy and returns the seed.")
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", &generator_state)
      .def("set_state", &set_generator_state, "state"_a);
  m.def("manual_seed", [](nb::handle seed) {
    pyflame::manual_seed(as_seed(seed));
    return &pyflame::default_generator();
  }, "seed"_a, nb::rv_policy::reference,
        "Seeds the default generator and returns it, as torch.manual_seed: random ops give the same numbers on "
        "every run and every device.");
  m.def("default_generator", [] { return &pyflame::default_generator(); }, nb::rv_policy::reference);

  m.def("_empty", [](nb::args shape, nb::handle dtype, nb::handle device) {
    return on(device, [&] { return Tensor::empty(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32)); });
  }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_zeros", [](nb::args shape, nb::handle dtype, nb::handle device) {
    return on(device, [&] { return pyflame::zeros(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32)); });
  }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_ones", [](nb::args shape, nb::handle dtype, nb::handle device) {
    return on(device, [&] { return pyflame::ones(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32)); });
  }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_full", [](nb::handle shape, nb::handle value, nb::handle dtype, nb::handle device) {
    return on(device, [&] {
      return pyflame::full(as_shape(nb::make_tuple(shape)), as_scalar(value, "fill value"), as_opt_dtype(dtype));
    });
  }, "shape"_a, "fill_value"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_full_like", [](const Tensor& x, nb::handle value, nb::handle dtype, nb::handle device) {
    if (device.is_none()) return pyflame::full_like(x, as_scalar(value, "fill value"), as_opt_dtype(dtype));
    return on(device, [&] {
      return pyflame::full(x.shape(), as_scalar(value, "fill value"), as_opt_dtype(dtype).value_or(x.dtype()));
    });
  }, "x"_a, "fill_value"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_to_device", [](const Tensor& t, nb::handle device) {
    return on(device, [&] { return pyflame::to(t, pyflame::current_device()); });
  }, "t"_a, "device"_a.none(), "t on a factory's target device (see as_target): pf.tensor's last step.");
  m.def("_arange", [](nb::handle start, nb::handle end, nb::handle step, nb::handle dtype, nb::handle device) {
    return on(device, [&] {
      return pyflame::arange(as_scalar(start, "start"), as_scalar(end, "end"), as_scalar(step, "step"),
                             as_opt_dtype(dtype));
    });
  }, "start"_a, "end"_a, "step"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_linspace", [](double start, double end, int64_t steps, nb::handle dtype, nb::handle device) {
    return on(device, [&] { return pyflame::linspace(start, end, steps, as_opt_dtype(dtype).value_or(DType::Float32)); });
  }, "start"_a, "end"_a, "steps"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_eye", [](int64_t n, std::optional<int64_t> mm, nb::handle dtype, nb::handle device) {
    return on(device, [&] { return pyflame::eye(n, mm, as_opt_dtype(dtype).value_or(DType::Float32)); });
  }, "n"_a, "m"_a = nb::none(), "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("_rand", [](nb::args shape, nb::handle dtype, nb::handle generator, nb::handle device) {
    return on(device, [&] {
      return pyflame::rand(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32), as_generator(generator));
    });
  }, "shape"_a, "dtype"_a = nb::none(), "generator"_a = nb::none(), "device"_a = nb::none());
  m.def("_randn", [](nb::args shape, nb::handle dtype, nb::handle generator, nb::handle device) {
    return on(device, [&] {
      return pyflame::randn(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32), as_generator(generator));
    });
  }, "shape"_a, "dtype"_a = nb::none(), "generator"_a = nb::none(), "device"_a = nb::none());
  m.def("_randint", [](int64_t low, int64_t high, nb::handle shape, nb::handle dtype, nb::handle generator,
                       nb::handle device) {
    return on(device, [&] {
      return pyflame::randint(low, high, as_shape(nb::make_tuple(shape)), as_opt_dtype(dtype).value_or(DType::Int64),
                              as_generator(generator));
    });
  }, "low"_a, "high"_a, "size"_a, "dtype"_a = nb::none(), "generator"_a = nb::none(), "device"_a = nb::none());
  // The table's composite draws: pyflame.bernoulli/normal and Tensor.bernoulli_ give them torch's forms.
  m.def("bernoulli", [](const Tensor& like, std::optional<Tensor> probs, double p, nb::handle generator) {
    return pyflame::bernoulli(like, probs.value_or(Tensor()), p, as_generator(generator));
  }, "like"_a, "probs"_a.none(), "p"_a, "generator"_a = nb::none());
  m.def("normal", [](std::optional<Tensor> mean, std::optional<Tensor> std, double mean_value, double std_value,
                      nb::handle size, nb::handle dtype, nb::handle generator, nb::handle device) {
    auto draw = [&] {
      return pyflame::normal(mean.value_or(Tensor()), std.value_or(Tensor()), mean_value, std_value,
                             size.is_none() ? Shape{} : as_shape(nb::make_tuple(size)),
                             as_opt_dtype(dtype).value_or(DType::Float32), as_generator(generator));
    };
    return mean || std ? draw() : on(device, draw);
  }, "mean"_a.none(), "std"_a.none(), "mean_value"_a, "std_value"_a, "size"_a = nb::none(), "dtype"_a = nb::none(),
        "generator"_a = nb::none(), "device"_a = nb::none());
  m.def("from_numpy", &tensor_from_numpy, "array"_a, "A CPU tensor sharing memory with a NumPy array.");
}

}  // namespace pyflame::python
