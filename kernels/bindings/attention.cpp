// Python bindings of the attention kernels (kernels/attention.h). The Python primitives over them are in
// adcuda/backends/cuda/attention.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>

#include "attention.h"
#include "bindings/registry.h"

namespace py = pybind11;
using adcuda::DeviceArray;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

const DeviceArray* mask_or_null(const std::optional<DeviceArray>& mask) { return mask ? &*mask : nullptr; }

}  // namespace

ADCUDA_REGISTER_BINDINGS(attention, 21) {
  m.def(
      "attention",
      [](const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const std::optional<DeviceArray>& mask,
         bool is_causal, double scale, double dropout_p, std::uint64_t seed, std::uint64_t offset) {
        return adcuda::attention(q, k, v, mask_or_null(mask), is_causal, scale, {dropout_p, seed, offset});
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("is_causal"), py::arg("scale"),
      py::arg("dropout_p") = 0.0, py::arg("seed") = 0, py::arg("offset") = 0, release_gil(),
      "(out, row logsumexp) of dropout(softmax(q k^T * scale + mask)) v, without materialising the scores.");
  m.def(
      "attention_backward",
      [](const DeviceArray& g, const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceArray& out,
         const DeviceArray& lse, const std::optional<DeviceArray>& mask, bool is_causal, double scale,
         double dropout_p, std::uint64_t seed, std::uint64_t offset) {
        return adcuda::attention_backward(g, q, k, v, out, lse, mask_or_null(mask), is_causal, scale,
                                          {dropout_p, seed, offset});
      },
      py::arg("g"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("mask"),
      py::arg("is_causal"), py::arg("scale"), py::arg("dropout_p") = 0.0, py::arg("seed") = 0, py::arg("offset") = 0,
      release_gil(), "(dq, dk, dv) recomputed from the saved lse (and the forward's dropout draw).");
  m.def(
      "attention_dropout_mask",
      [](const adcuda::Dims& shape, double p, std::uint64_t seed, std::uint64_t offset, int device) {
        return adcuda::attention_dropout_mask(shape, {p, seed, offset}, device);
      },
      py::arg("shape"), py::arg("p"), py::arg("seed"), py::arg("offset"), py::arg("device") = -1, release_gil(),
      "The bool keep-mask (batch..., L, S) that attention's dropout (p, seed, offset) applies.");
  m.def("attention_kernel_path", &adcuda::attention_kernel_path, py::arg("q"), py::arg("v"),
        "'tensor cores' or 'cuda cores': which attention kernels run for these operands.");
}
