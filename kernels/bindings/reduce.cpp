// Python bindings of the reductions (kernels/reduce.h); the Python primitives over them are in
// adcuda/backends/cuda/reduce.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "reduce.h"

namespace py = pybind11;
using adcuda::DeviceArray;

ADCUDA_REGISTER_BINDINGS(reduce, 10) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("reduce", &adcuda::reduce, py::arg("op"), py::arg("a"), py::arg("axes"), py::arg("keepdim"), release(),
        "sum prod mean amax amin all any over `axes` (int64 for integer sums and products, bool for all/any).");
  m.def("argreduce", &adcuda::argreduce, py::arg("op"), py::arg("a"), py::arg("axis"), py::arg("keepdim"), release(),
        "argmax / argmin along `axis` (None: flattened), int64.");
  m.def("var", &adcuda::var, py::arg("a"), py::arg("axes"), py::arg("correction"), py::arg("keepdim"), release());
  m.def("logsumexp", &adcuda::logsumexp, py::arg("a"), py::arg("axes"), py::arg("keepdim"), release());
}
