// Python bindings of the fused NN kernels: softmax and cross-entropy (kernels/softmax_loss.h), layer
// norm (kernels/norm.h) and attention (kernels/attention.h). The Python primitives over them are in
// adcuda/backends/cuda_nn.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "attention.h"
#include "bindings/registry.h"
#include "norm.h"
#include "softmax_loss.h"

namespace py = pybind11;
using adcuda::DeviceArray;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

const DeviceArray* pointer_or_null(const std::optional<DeviceArray>& a) { return a ? &*a : nullptr; }

}  // namespace

ADCUDA_REGISTER_BINDINGS(nn, 21) {
  m.def("softmax", &adcuda::softmax, py::arg("a"), py::arg("axis"), py::arg("log"), release_gil(),
        "(log-)softmax of contiguous `a` along `axis`.");
  m.def("softmax_backward", &adcuda::softmax_backward, py::arg("y"), py::arg("g"), py::arg("axis"), py::arg("log"),
        release_gil(), "The input gradient of (log-)softmax from its output y and output gradient g.");
  m.def("cross_entropy", &adcuda::cross_entropy, py::arg("logits"), py::arg("target"), py::arg("ignore_index"),
        py::arg("label_smoothing"), release_gil(), "(losses (N,), log-probabilities (N, C)) of (N, C) logits.");
  m.def("cross_entropy_backward", &adcuda::cross_entropy_backward, py::arg("logp"), py::arg("target"),
        py::arg("g_rows"), py::arg("ignore_index"), py::arg("label_smoothing"), release_gil(),
        "The gradient w.r.t. the logits.");
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
      "attention",
      [](const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const std::optional<DeviceArray>& mask,
         bool is_causal, double scale, double dropout_p, std::uint64_t seed, std::uint64_t offset) {
        return adcuda::attention(q, k, v, pointer_or_null(mask), is_causal, scale, {dropout_p, seed, offset});
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("is_causal"), py::arg("scale"),
      py::arg("dropout_p") = 0.0, py::arg("seed") = 0, py::arg("offset") = 0, release_gil(),
      "(out, row logsumexp) of dropout(softmax(q k^T * scale + mask)) v, without materialising the scores.");
  m.def(
      "attention_backward",
      [](const DeviceArray& g, const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceArray& out,
         const DeviceArray& lse, const std::optional<DeviceArray>& mask, bool is_causal, double scale,
         double dropout_p, std::uint64_t seed, std::uint64_t offset) {
        return adcuda::attention_backward(g, q, k, v, out, lse, pointer_or_null(mask), is_causal, scale,
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
