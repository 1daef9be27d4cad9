// Python bindings of the GEMM kernels (kernels/gemm.h); the Python primitive over them is
// adcuda/backends/cuda/gemm.py. Calls release the GIL while they check and queue the work.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings/registry.h"
#include "gemm.h"

namespace py = pybind11;
using adcuda::DeviceArray;

ADCUDA_REGISTER_BINDINGS(gemm, 20) {
  m.def(
      "matmul",
      [](const DeviceArray& a, const DeviceArray& b, const std::optional<DeviceArray>& bias) {
        return adcuda::matmul(a, b, bias ? &*bias : nullptr);
      },
      py::arg("a"), py::arg("b"), py::arg("bias") = py::none(), py::call_guard<py::gil_scoped_release>(),
      "a (..., M, K) @ b (..., K, N) with broadcast batch dims, read through their strides; `bias` (N,) is "
      "added to every row. A new contiguous array in the operands' (shared, floating point) dtype.");
  m.def("gemm_path", &adcuda::gemm_path, py::arg("device"), py::call_guard<py::gil_scoped_release>(),
        "Which GEMM kernels matmul uses on `device`.");
}
