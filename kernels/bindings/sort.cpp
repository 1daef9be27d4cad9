// Python bindings of the sorts, scans and boolean-mask compaction (kernels/sort.h); the Python primitives
// over them are in adcuda/backends/cuda/sort.py (sort, cumsum, cumprod, scan) and adcuda/backends/cuda/index.py (masks).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "sort.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(sort, 10) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("sort_rows", &adcuda::sort_rows, py::arg("a"), py::arg("descending"), release(),
        "(values, int64 indices) of each row (last dim) sorted stably; NaN last ascending.");
  m.def("cumsum_rows", &adcuda::cumsum_rows, py::arg("a"), release(),
        "Inclusive prefix sums along the last dim (int64 for integer and bool input).");
  m.def("cumprod_rows", &adcuda::cumprod_rows, py::arg("a"), release(),
        "Inclusive prefix products along the last dim (int64 for integer and bool input).");
  m.def("scan_rows", &adcuda::scan_rows, py::arg("a"), py::arg("op"), release(),
        "Inclusive scans along the last dim by op: 'max', 'min' (NaN propagates) or 'logaddexp'.");
  m.def("nonzero", &adcuda::nonzero, py::arg("mask"), release(),
        "(count, ndim) int64 coordinates of the true elements (waits for the device for the count).");
}
