// Python bindings of the GEMM (kernels/gemm.h); the Python primitive over them is
// adcuda/backends/cuda/gemm.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/registry.h"
#include "gemm.h"

namespace py = pybind11;
using adcuda::DeviceArray;

namespace {

adcuda::GemmActivation parse_activation(const std::string& name) {
  if (name == "none") return adcuda::GemmActivation::kNone;
  if (name == "gelu_tanh") return adcuda::GemmActivation::kGeluTanh;
  throw std::invalid_argument("matmul: activation must be 'none' or 'gelu_tanh', got '" + name + "'");
}

py::dict status_dict(const adcuda::CublasLtStatus& status) {
  py::dict facts;
  facts["loaded"] = status.loaded;
  facts["path"] = status.path;
  facts["version"] = status.version;
  facts["error"] = status.error;
  return facts;
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(gemm, 20) {
  m.def(
      "matmul",
      [](const DeviceArray& a, const DeviceArray& b, const std::optional<DeviceArray>& bias,
         const std::string& activation, bool save_preactivation, bool allow_cublaslt) -> py::object {
        adcuda::MatmulOptions options;
        options.bias = bias ? &*bias : nullptr;
        options.activation = parse_activation(activation);
        options.save_preactivation = save_preactivation;
        options.allow_cublaslt = allow_cublaslt;
        adcuda::MatmulResult result = [&] {
          py::gil_scoped_release release;
          return adcuda::matmul(a, b, options);
        }();
        if (save_preactivation) return py::make_tuple(std::move(result.out), std::move(*result.preactivation));
        return py::cast(std::move(result.out));
      },
      py::arg("a"), py::arg("b"), py::arg("bias") = py::none(), py::arg("activation") = "none",
      py::arg("save_preactivation") = false, py::arg("allow_cublaslt") = false,
      "activation(a (..., M, K) @ b (..., K, N) + bias) with broadcast batch dims, read through their strides; "
      "`bias` (N,) is added to every row, `activation` is 'none' or 'gelu_tanh'. A new contiguous array in the "
      "operands' (shared, floating point) dtype; with save_preactivation=True the pair (out, a @ b + bias). "
      "allow_cublaslt lets a loaded cuBLASLt compute the calls it can express.");
  m.def("gemm_split_k", &adcuda::tensor_core_split_k, py::arg("M"), py::arg("N"), py::arg("K"), py::arg("batch"),
        py::arg("multiprocessors"),
        "How many K splits the tensor-core GEMM makes of an M x N x K product with `batch` entries on a GPU with "
        "`multiprocessors` SMs (1: none); ADCUDA_GEMM_SPLIT_K overrides it at run time.");
  m.def(
      "gemm_tensor_core_variant",
      [](std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t a_stride_m, std::int64_t a_stride_k,
         std::int64_t b_stride_k, std::int64_t b_stride_n, std::int64_t a_offset, std::int64_t b_offset) {
        const adcuda::TensorCoreVariant variant =
            adcuda::tensor_core_variant(M, N, K, a_stride_m, a_stride_k, b_stride_k, b_stride_n, a_offset, b_offset);
        py::dict facts;
        facts["a_load"] = variant.a_load;
        facts["b_load"] = variant.b_load;
        facts["a_k_contiguous"] = variant.a_k_contiguous;
        facts["b_k_contiguous"] = variant.b_k_contiguous;
        facts["b_staged"] = variant.b_staged;
        facts["epilogue"] = variant.epilogue;
        return facts;
      },
      py::arg("M"), py::arg("N"), py::arg("K"), py::arg("a_stride_m"), py::arg("a_stride_k"), py::arg("b_stride_k"),
      py::arg("b_stride_n"), py::arg("a_offset") = 0, py::arg("b_offset") = 0,
      "How the tensor-core GEMM would run an M x N x K product with these operand strides (elements) and "
      "offsets (elements past a 16-byte aligned address), without running it: {a_load, b_load ('cp.async', "
      "'realigned' or 'elements'), a_k_contiguous, b_k_contiguous, b_staged, epilogue}.");
  m.def("gemm_path", &adcuda::gemm_path, py::arg("device"), py::call_guard<py::gil_scoped_release>(),
        "Which hand-written GEMM kernels matmul uses on `device`.");
  m.def("gemm_last_half_kernel", &adcuda::gemm_last_half_kernel,
        "The kernel the last fp16/bf16 matmul of this process ran: 'none' (before any), 'cublaslt', 'sm90_wgmma', "
        "'sm80_mma_sync' or 'simt'.");
  m.def(
      "cublaslt_load",
      [](const std::vector<std::string>& candidates) { return status_dict(adcuda::cublaslt_load(candidates)); },
      py::arg("candidates"),
      "Loads the first of `candidates` (paths or sonames) that opens and has every cuBLASLt function matmul "
      "calls; once one is loaded it stays. Returns {loaded, path, version, error}.");
  m.def(
      "cublaslt_status", [] { return status_dict(adcuda::cublaslt_status()); },
      "The loaded cuBLASLt: {loaded, path, version, error}.");
}
