// Python bindings of the layer-, RMS-, group- and batch-norm kernels (kernels/norm.h). The Python primitives over them are in
// adcuda/backends/cuda/norm.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>

#include "bindings/registry.h"
#include "norm.h"

namespace py = pybind11;
using adcuda::DeviceArray;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

const DeviceArray* pointer_or_null(const std::optional<DeviceArray>& a) { return a ? &*a : nullptr; }

}  // namespace

ADCUDA_REGISTER_BINDINGS(norm, 21) {
  m.def(
      "layer_norm",
      [](const DeviceArray& x, const std::optional<DeviceArray>& weight, const std::optional<DeviceArray>& bias, int n,
         double eps) { return adcuda::layer_norm(x, pointer_or_null(weight), pointer_or_null(bias), n, eps); },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("n"), py::arg("eps"), release_gil(),
      "(y, mean, rstd) normalising the last n dims of contiguous x.");
  m.def(
      "layer_norm_backward",
      [](const DeviceArray& g, const DeviceArray& x, const std::optional<DeviceArray>& weight, const DeviceArray& mean,
         const DeviceArray& rstd, int n) {
        return adcuda::layer_norm_backward(g, x, pointer_or_null(weight), mean, rstd, n);
      },
      py::arg("g"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"), py::arg("n"), release_gil(),
      "(dx, dweight or None, dbias).");
  m.def(
      "add_layer_norm",
      [](const DeviceArray& x, const DeviceArray& residual, const std::optional<DeviceArray>& weight,
         const std::optional<DeviceArray>& bias, int n, double eps, adcuda::ScalarType y_dtype) {
        return adcuda::add_layer_norm(x, residual, pointer_or_null(weight), pointer_or_null(bias), n, eps, y_dtype);
      },
      py::arg("x"), py::arg("residual"), py::arg("weight"), py::arg("bias"), py::arg("n"), py::arg("eps"),
      py::arg("y_dtype"), release_gil(),
      "(y, h, mean, rstd): h = x + residual, y its layer norm over the last n dims, in y_dtype (x's, or a half "
      "type for float32 x).");
  m.def(
      "add_layer_norm_backward",
      [](const DeviceArray& g, const std::optional<DeviceArray>& grad_sum, const DeviceArray& h,
         const std::optional<DeviceArray>& weight, const DeviceArray& mean, const DeviceArray& rstd, int n) {
        return adcuda::add_layer_norm_backward(g, pointer_or_null(grad_sum), h, pointer_or_null(weight), mean, rstd,
                                               n);
      },
      py::arg("g"), py::arg("grad_sum"), py::arg("h"), py::arg("weight"), py::arg("mean"), py::arg("rstd"),
      py::arg("n"), release_gil(), "(dh, dweight or None, dbias): dh = layer norm's dx at h + grad_sum.");
  m.def(
      "rms_norm",
      [](const DeviceArray& x, const std::optional<DeviceArray>& weight, int n, double eps) {
        return adcuda::rms_norm(x, pointer_or_null(weight), n, eps);
      },
      py::arg("x"), py::arg("weight"), py::arg("n"), py::arg("eps"), release_gil(),
      "(y, rstd) RMS-normalising the last n dims of contiguous x.");
  m.def(
      "rms_norm_backward",
      [](const DeviceArray& g, const DeviceArray& x, const std::optional<DeviceArray>& weight, const DeviceArray& rstd,
         int n) { return adcuda::rms_norm_backward(g, x, pointer_or_null(weight), rstd, n); },
      py::arg("g"), py::arg("x"), py::arg("weight"), py::arg("rstd"), py::arg("n"), release_gil(),
      "(dx, dweight or None).");
  m.def(
      "group_norm",
      [](const DeviceArray& x, const std::optional<DeviceArray>& weight, const std::optional<DeviceArray>& bias,
         std::int64_t groups, double eps) {
        return adcuda::group_norm(x, pointer_or_null(weight), pointer_or_null(bias), groups, eps);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("groups"), py::arg("eps"), release_gil(),
      "(y, mean (N, groups), rstd (N, groups)) group-normalising contiguous x (N, C, *), affine per channel.");
  m.def(
      "group_norm_backward",
      [](const DeviceArray& g, const DeviceArray& x, const std::optional<DeviceArray>& weight, const DeviceArray& mean,
         const DeviceArray& rstd, std::int64_t groups) {
        return adcuda::group_norm_backward(g, x, pointer_or_null(weight), mean, rstd, groups);
      },
      py::arg("g"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"), py::arg("groups"),
      release_gil(), "(dx, dweight or None, dbias).");
  m.def(
      "batch_norm",
      [](const DeviceArray& x, const std::optional<DeviceArray>& weight, const std::optional<DeviceArray>& bias,
         double eps) { return adcuda::batch_norm(x, pointer_or_null(weight), pointer_or_null(bias), eps); },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps"), release_gil(),
      "(y, mean (C,), rstd (C,)) normalising each channel (dim 1) of contiguous x with its batch statistics.");
  m.def(
      "batch_norm_backward",
      [](const DeviceArray& g, const DeviceArray& x, const std::optional<DeviceArray>& weight, const DeviceArray& mean,
         const DeviceArray& rstd) { return adcuda::batch_norm_backward(g, x, pointer_or_null(weight), mean, rstd); },
      py::arg("g"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"), release_gil(),
      "(dx, dweight or None, dbias).");
}
