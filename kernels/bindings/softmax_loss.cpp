// Python bindings of the softmax and cross-entropy kernels (kernels/softmax_loss.h). The Python
// primitives over them are in adcuda/backends/cuda/softmax_loss.py. Calls release the GIL while they
// check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>

#include "bindings/registry.h"
#include "softmax_loss.h"

namespace py = pybind11;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

}  // namespace

ADCUDA_REGISTER_BINDINGS(softmax_loss, 21) {
  m.def("softmax", &adcuda::softmax, py::arg("a"), py::arg("axis"), py::arg("log"), release_gil(),
        "(log-)softmax of contiguous `a` along `axis`.");
  m.def("softmax_backward", &adcuda::softmax_backward, py::arg("y"), py::arg("g"), py::arg("axis"), py::arg("log"),
        release_gil(), "The input gradient of (log-)softmax from its output y and output gradient g.");
  m.def(
      "classifier_loss",
      [](const adcuda::DeviceArray& logits, const adcuda::DeviceArray& target,
         const std::optional<adcuda::DeviceArray>& weight, std::int64_t ignore_index, double label_smoothing) {
        return adcuda::classifier_loss(logits, target, weight ? &*weight : nullptr, ignore_index, label_smoothing);
      },
      py::arg("logits"), py::arg("target"), py::arg("weight"), py::arg("ignore_index"), py::arg("label_smoothing"),
      release_gil(), "(losses (N,), statistics (N, 2)) of (N, C) logits: the fused classifier's forward.");
  m.def(
      "classifier_loss_backward",
      [](const adcuda::DeviceArray& logits, const adcuda::DeviceArray& stats, const adcuda::DeviceArray& target,
         const std::optional<adcuda::DeviceArray>& weight, const adcuda::DeviceArray& g_rows, std::int64_t ignore_index,
         double label_smoothing) {
        return adcuda::classifier_loss_backward(logits, stats, target, weight ? &*weight : nullptr, g_rows,
                                                ignore_index, label_smoothing);
      },
      py::arg("logits"), py::arg("stats"), py::arg("target"), py::arg("weight"), py::arg("g_rows"),
      py::arg("ignore_index"), py::arg("label_smoothing"), release_gil(),
      "The gradient w.r.t. the logits, in their dtype, from the logits and the forward's statistics.");
}
