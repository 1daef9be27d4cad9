// Python bindings of the max- and average-pooling kernels (kernels/pooling.h); the Python primitives over them are in
// adcuda/backends/cuda/pooling.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "pooling.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(pooling, 24) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("max_pool2d", &adcuda::max_pool2d, py::arg("x"), py::arg("kh"), py::arg("kw"), py::arg("stride_h"),
        py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"), py::arg("dilation_h"), py::arg("dilation_w"),
        py::arg("out_h"), py::arg("out_w"), release(), "(values, int64 indices) of max pooling over contiguous NCHW x.");
  m.def("adaptive_max_pool2d", &adcuda::adaptive_max_pool2d, py::arg("x"), py::arg("out_h"), py::arg("out_w"),
        release(), "(values, int64 indices) over PyTorch's adaptive windows.");
  m.def("max_pool2d_backward", &adcuda::max_pool2d_backward, py::arg("g"), py::arg("indices"), py::arg("h"),
        py::arg("w"), release(), "Gradients (float32/float64) added at the indices' positions.");
  m.def("avg_pool2d", &adcuda::avg_pool2d, py::arg("x"), py::arg("kh"), py::arg("kw"), py::arg("stride_h"),
        py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"), py::arg("out_h"), py::arg("out_w"),
        py::arg("count_include_pad"), py::arg("divisor_override"), release(),
        "Window means of contiguous NCHW x (divisor_override 0: none).");
  m.def("avg_pool2d_backward", &adcuda::avg_pool2d_backward, py::arg("grad"), py::arg("h"), py::arg("w"),
        py::arg("kh"), py::arg("kw"), py::arg("stride_h"), py::arg("stride_w"), py::arg("pad_h"), py::arg("pad_w"),
        py::arg("count_include_pad"), py::arg("divisor_override"), release(), "avg_pool2d's input gradient.");
  m.def("adaptive_avg_pool2d", &adcuda::adaptive_avg_pool2d, py::arg("x"), py::arg("out_h"), py::arg("out_w"),
        release(), "Means over PyTorch's adaptive windows.");
  m.def("adaptive_avg_pool2d_backward", &adcuda::adaptive_avg_pool2d_backward, py::arg("grad"), py::arg("h"),
        py::arg("w"), release(), "adaptive_avg_pool2d's input gradient.");
}
