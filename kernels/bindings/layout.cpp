// Python bindings of the layout kernels (kernels/layout.h); the Python primitives over them are in
// adcuda/backends/cuda/layout.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "layout.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(layout, 10) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("cat", &adcuda::cat, py::arg("arrays"), py::arg("axis"), release());
  m.def("tril", &adcuda::tril, py::arg("a"), py::arg("k"), release());
  m.def("triu", &adcuda::triu, py::arg("a"), py::arg("k"), release());
}
