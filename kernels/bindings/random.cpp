// Python bindings of the random kernels (kernels/random.h); the Python primitives over them are in
// adcuda/backends/cuda/random.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>

#include "bindings/registry.h"
#include "random.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(random, 10) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("rand", &adcuda::rand, py::arg("shape"), py::arg("dtype"), py::arg("seed"), py::arg("offset"),
        py::arg("device") = -1, release(), "Uniform [0, 1) from Philox4x32-10 at (seed, offset).");
  m.def("randn", &adcuda::randn, py::arg("shape"), py::arg("dtype"), py::arg("seed"), py::arg("offset"),
        py::arg("device") = -1, release(), "Standard normal (Box-Muller) from Philox4x32-10 at (seed, offset).");
  m.def("randint", &adcuda::randint, py::arg("low"), py::arg("high"), py::arg("shape"), py::arg("dtype"),
        py::arg("seed"), py::arg("offset"), py::arg("device") = -1, release(), "Integers uniform on [low, high).");
  m.def("bernoulli", &adcuda::bernoulli, py::arg("shape"), py::arg("p"), py::arg("dtype"), py::arg("seed"),
        py::arg("offset"), py::arg("device") = -1, release(), "1 with probability p, else 0.");
  m.def("dropout", &adcuda::dropout, py::arg("x"), py::arg("p"), py::arg("seed"), py::arg("offset"), release(),
        "(x * mask / (1 - p), bool mask) in one pass; mask = bernoulli(x.shape, 1 - p, bool, seed, offset).");
  m.def("dropout_backward", &adcuda::dropout_backward, py::arg("g"), py::arg("mask"), py::arg("scale"), release(),
        "g * mask * scale from the saved bool mask.");
}
