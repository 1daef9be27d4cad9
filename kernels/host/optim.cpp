// The CPU backend's SGD and Adam steps over float32 tensors (adcuda/backends/cpu/optim.py): one pass per
// tensor. NumPy makes a dozen passes for an Adam update (each operation of PyTorch's order a whole-array
// ufunc with a temporary) and three through a float64 temporary for each of SGD's fused multiply-adds;
// here each element is read and written once, with the same operations in the same order and the same
// roundings, so the results are bit for bit the NumPy path's (tests/test_cpu_fast_paths.py compares
// them). This file is compiled with -ffp-contract=off (CMakeLists.txt): a contracted a * b + c would
// round once where NumPy rounds twice. Built in every install, with or without CUDA; calls release the
// GIL.
#define ADCUDA_HOST_ISA baseline
#include "optim_loops.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "elementwise_avx2.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// The float32 data of each array of `list` (None or empty: no arrays), checked: float32, C-contiguous,
// writeable where the step writes it, of the sizes `sizes` gives (filled by the first list read).
std::vector<float*> float32_data(const char* op, const py::object& list, bool written, std::vector<Index>& sizes) {
  std::vector<float*> data;
  if (list.is_none()) return data;
  const bool first = sizes.empty();
  std::size_t k = 0;
  for (const py::handle item : list) {
    if (!py::isinstance<py::array>(item))
      throw std::invalid_argument(std::string(op) + ": every array must be a C-contiguous float32 array");
    auto a = py::reinterpret_borrow<py::array>(item);
    if (!a.dtype().equal(py::dtype::of<float>()) || !(a.flags() & py::array::c_style))
      throw std::invalid_argument(std::string(op) + ": every array must be a C-contiguous float32 array");
    if (written && !a.writeable()) throw std::invalid_argument(std::string(op) + ": an updated array is read-only");
    if (first)
      sizes.push_back(a.size());
    else if (k >= sizes.size() || sizes[k] != a.size())
      throw std::invalid_argument(std::string(op) + ": the lists must hold one array per parameter, of its size");
    data.push_back(static_cast<float*>(a.mutable_data()));
    ++k;
  }
  if (!first && !data.empty() && data.size() != sizes.size())
    throw std::invalid_argument(std::string(op) + ": the lists must hold one array per parameter, of its size");
  return data;
}

}  // namespace

void bind_optim(py::module_& m) {
  m.def(
      "cpu_sgd_step_",
      [](const py::list& params, const py::list& grads, const py::object& bufs, double lr, double momentum,
         double dampening, bool nesterov, double weight_decay, bool first_step, std::optional<bool> avx2) {
        const char* op = "cpu_sgd_step_";
        const auto tensor = choose_avx2(op, avx2) ? &avx2::sgd_tensor : &baseline::sgd_tensor;
        std::vector<Index> sizes;
        auto w = float32_data(op, params, true, sizes);
        auto g = float32_data(op, grads, false, sizes);
        auto b = float32_data(op, bufs, true, sizes);
        if (g.size() != w.size() || (momentum != 0.0 && b.size() != w.size()))
          throw std::invalid_argument("cpu_sgd_step_: every parameter needs its gradient (and buffer, with momentum)");
        const Sgd c{lr, momentum, dampening, weight_decay, nesterov, first_step};
        py::gil_scoped_release release;
        for (std::size_t k = 0; k < w.size(); ++k) tensor(w[k], g[k], b.empty() ? nullptr : b[k], sizes[k], c);
      },
      py::arg("params"), py::arg("grads"), py::arg("bufs"), py::arg("lr"), py::arg("momentum"), py::arg("dampening"),
      py::arg("nesterov"), py::arg("weight_decay"), py::arg("first_step"), py::arg("avx2") = py::none(),
      "SGD over lists of C-contiguous float32 arrays, in place: the CPU backend's sgd_step_ in one pass a tensor. "
      "``avx2``: the AVX2 build of the loops (True, only where host_has_avx2()) or the baseline one (False); "
      "None: AVX2 where the CPU has it. Both give the same numbers.");
  m.def(
      "cpu_adam_step_",
      [](const py::list& params, const py::list& grads, const py::list& exp_avgs, const py::list& exp_avg_sqs,
         const py::object& max_exp_avg_sqs, double lr, double beta1, double beta2, double eps, double weight_decay,
         bool decoupled, double bias_correction2_sqrt, double step_size, std::optional<bool> avx2) {
        const char* op = "cpu_adam_step_";
        const auto tensor = choose_avx2(op, avx2) ? &avx2::adam_tensor : &baseline::adam_tensor;
        std::vector<Index> sizes;
        auto w = float32_data(op, params, true, sizes);
        auto g = float32_data(op, grads, false, sizes);
        auto m1 = float32_data(op, exp_avgs, true, sizes);
        auto m2 = float32_data(op, exp_avg_sqs, true, sizes);
        auto mx = float32_data(op, max_exp_avg_sqs, true, sizes);
        if (g.size() != w.size() || m1.size() != w.size() || m2.size() != w.size() ||
            (!mx.empty() && mx.size() != w.size()))
          throw std::invalid_argument("cpu_adam_step_: every parameter needs its gradient and state");
        const Adam c{lr, beta1, beta2, eps, weight_decay, bias_correction2_sqrt, step_size, decoupled};
        py::gil_scoped_release release;
        for (std::size_t k = 0; k < w.size(); ++k)
          tensor(w[k], g[k], m1[k], m2[k], mx.empty() ? nullptr : mx[k], sizes[k], c);
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"),
      py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("decoupled"),
      py::arg("bias_correction2_sqrt"), py::arg("step_size"), py::arg("avx2") = py::none(),
      "Adam/AdamW (AMSGrad with max_exp_avg_sqs) over lists of C-contiguous float32 arrays, in place: the CPU "
      "backend's adam_step_ with its state in float32, in one pass a tensor. ``avx2``: as cpu_sgd_step_'s.");
}

}  // namespace adcuda::host
