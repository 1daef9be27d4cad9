// Python bindings of the attention kernels (kernels/attention.h). The Python primitives over them are in
// adcuda/backends/cuda/attention.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "attention.h"
#include "bindings/registry.h"

namespace py = pybind11;
using adcuda::DeviceArray;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

const DeviceArray* pointer_or_null(const std::optional<DeviceArray>& a) { return a ? &*a : nullptr; }

}  // namespace

ADCUDA_REGISTER_BINDINGS(attention, 21) {
  m.def(
      "attention",
      [](const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const std::optional<DeviceArray>& mask,
         bool is_causal, double scale) { return adcuda::attention(q, k, v, pointer_or_null(mask), is_causal, scale); },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("is_causal"), py::arg("scale"), release_gil(),
      "(out, row logsumexp) of softmax(q k^T * scale + mask) v, without materialising the scores.");
  m.def(
      "attention_backward",
      [](const DeviceArray& g, const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceArray& out,
         const DeviceArray& lse, const std::optional<DeviceArray>& mask, bool is_causal, double scale) {
        return adcuda::attention_backward(g, q, k, v, out, lse, pointer_or_null(mask), is_causal, scale);
      },
      py::arg("g"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("mask"),
      py::arg("is_causal"), py::arg("scale"), release_gil(), "(dq, dk, dv) recomputed from the saved lse.");
}
