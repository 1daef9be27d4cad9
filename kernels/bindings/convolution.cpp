// Python bindings of the convolution kernels (kernels/convolution.h); the Python primitives over them are in
// adcuda/backends/cuda/convolution.py, which checks the shapes. Calls release the GIL while they check and
// queue the work. The geometry travels as 16 ints: N, C, H, W, O, kh, kw, Ho, Wo, groups, then the
// stride, padding and dilation pairs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>

#include "bindings/registry.h"
#include "convolution.h"

namespace py = pybind11;
using adcuda::ConvGeometry;
using adcuda::DeviceArray;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;
using GeometryInts = std::array<std::int64_t, 16>;

ConvGeometry geometry(const GeometryInts& v) {
  return ConvGeometry{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13],
                      v[14], v[15]};
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(convolution, 24) {
  m.def(
      "conv2d", [](const DeviceArray& x, const DeviceArray& weight, const GeometryInts& g) {
        return adcuda::conv2d(x, weight, geometry(g));
      },
      py::arg("x"), py::arg("weight"), py::arg("geometry"), release_gil(),
      "Implicit-GEMM convolution (tensor cores for fp16/bf16) of contiguous NCHW x -> (N, O, Ho, Wo).");
  m.def(
      "conv2d_backward_input", [](const DeviceArray& g, const DeviceArray& weight, const GeometryInts& geo) {
        return adcuda::conv2d_backward_input(g, weight, geometry(geo));
      },
      py::arg("g"), py::arg("weight"), py::arg("geometry"), release_gil(), "The input's gradient (N, C, H, W).");
  m.def(
      "conv2d_backward_weight", [](const DeviceArray& g, const DeviceArray& x, const GeometryInts& geo) {
        return adcuda::conv2d_backward_weight(g, x, geometry(geo));
      },
      py::arg("g"), py::arg("x"), py::arg("geometry"), release_gil(),
      "The weight's gradient, split over N*Ho*Wo and summed in a fixed order.");
}
