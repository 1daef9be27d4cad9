// Python bindings of the resampling kernels (kernels/resample.h); the Python primitives over them are in
// adcuda/backends/cuda/resample.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "resample.h"

namespace py = pybind11;

ADCUDA_REGISTER_BINDINGS(resample, 25) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("interpolate_nearest", &adcuda::interpolate_nearest, py::arg("x"), py::arg("out_h"), py::arg("out_w"),
        py::arg("scale_h"), py::arg("scale_w"), py::arg("exact"), release(),
        "Nearest (or nearest-exact) resize of contiguous NCHW x of any dtype.");
  m.def("interpolate_nearest_backward", &adcuda::interpolate_nearest_backward, py::arg("grad"), py::arg("h"),
        py::arg("w"), py::arg("scale_h"), py::arg("scale_w"), py::arg("exact"), release(),
        "interpolate_nearest's input gradient (gather form).");
  m.def("interpolate_bilinear", &adcuda::interpolate_bilinear, py::arg("x"), py::arg("out_h"), py::arg("out_w"),
        py::arg("scale_h"), py::arg("scale_w"), py::arg("align_corners"), release(),
        "Bilinear resize of contiguous floating point NCHW x.");
  m.def("interpolate_bilinear_backward", &adcuda::interpolate_bilinear_backward, py::arg("grad"), py::arg("h"),
        py::arg("w"), py::arg("scale_h"), py::arg("scale_w"), py::arg("align_corners"), release(),
        "interpolate_bilinear's input gradient (gather form).");
  m.def(
      "pad",
      [](const adcuda::DeviceArray& x, const std::vector<std::int64_t>& pads, const std::string& mode, double value) {
        return adcuda::pad(x, pads, adcuda::pad_mode(mode), value);
      },
      py::arg("x"), py::arg("pads"), py::arg("mode"), py::arg("value"), release(),
      "Contiguous x with its last len(pads) / 2 <= 3 dims padded by (before, after) pairs.");
  m.def(
      "pad_backward",
      [](const adcuda::DeviceArray& grad, const adcuda::Dims& input_shape, const std::vector<std::int64_t>& pads,
         const std::string& mode) { return adcuda::pad_backward(grad, input_shape, pads, adcuda::pad_mode(mode)); },
      py::arg("grad"), py::arg("input_shape"), py::arg("pads"), py::arg("mode"), release(),
      "pad's input gradient (gather form).");
}
