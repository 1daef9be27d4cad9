// Python bindings of the multi-tensor optimizer and loss-scaling kernels (kernels/optim.h); the Python
// primitives over them are in adcuda/backends/cuda/optim.py. Lists arrive as Python lists of
// DeviceArrays (copied into vectors of handles while the GIL is held); calls then release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "bindings/registry.h"
#include "optim.h"

namespace py = pybind11;
using adcuda::DeviceArray;
using Arrays = std::vector<DeviceArray>;

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;

}  // namespace

ADCUDA_REGISTER_BINDINGS(optim, 22) {
  m.def(
      "sgd_step_",
      [](const Arrays& params, const Arrays& grads, const Arrays& bufs, const Arrays& masters, double lr,
         double momentum, double dampening, bool nesterov, double weight_decay, bool first_step) {
        adcuda::sgd_step_(params, grads, bufs, masters,
                          adcuda::SgdOptions{lr, momentum, dampening, weight_decay, nesterov, first_step});
      },
      py::arg("params"), py::arg("grads"), py::arg("bufs"), py::arg("masters"), py::arg("lr"), py::arg("momentum"),
      py::arg("dampening"), py::arg("nesterov"), py::arg("weight_decay"), py::arg("first_step"), release_gil(),
      "PyTorch's SGD over many tensors in place; empty `bufs` without momentum, empty `masters` without fp32 "
      "master weights.");
  m.def(
      "adam_step_",
      [](const Arrays& params, const Arrays& grads, const Arrays& exp_avgs, const Arrays& exp_avg_sqs,
         const Arrays& masters, const Arrays& max_exp_avg_sqs, std::int64_t step, double lr, double beta1,
         double beta2, double eps, double weight_decay, bool decoupled,
         const std::optional<DeviceArray>& grad_multiplier) {
        adcuda::adam_step_(params, grads, exp_avgs, exp_avg_sqs, masters, max_exp_avg_sqs,
                           adcuda::AdamOptions{step, lr, beta1, beta2, eps, weight_decay, decoupled},
                           grad_multiplier ? &*grad_multiplier : nullptr);
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("masters"),
      py::arg("max_exp_avg_sqs"), py::arg("step"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
      py::arg("weight_decay"), py::arg("decoupled"), py::arg("grad_multiplier") = std::nullopt, release_gil(),
      "Adam / AdamW (decoupled) over many tensors in place; empty `masters` / `max_exp_avg_sqs` when unused; "
      "`grad_multiplier` a one-element float32 device array scaling every gradient first (or None).");
  m.def(
      "unscale_and_check_",
      [](const Arrays& outs, const Arrays& grads, const std::optional<DeviceArray>& inv_scale_array,
         double inv_scale_value, int device) {
        return adcuda::unscale_and_check_(outs, grads, inv_scale_array ? &*inv_scale_array : nullptr,
                                          inv_scale_value, device);
      },
      py::arg("outs"), py::arg("grads"), py::arg("inv_scale_array"), py::arg("inv_scale_value"), py::arg("device"),
      release_gil(), "outs[i] = grads[i] * inv_scale; returns the 0-d float32 found-inf flag, on the device.");
  m.def(
      "update_scale_",
      [](const DeviceArray& scale, const DeviceArray& growth_tracker, const DeviceArray& found_inf,
         double growth_factor, double backoff_factor, std::int64_t growth_interval, double min_scale,
         double max_scale) {
        adcuda::update_scale_(scale, growth_tracker, found_inf,
                              adcuda::ScaleUpdate{growth_factor, backoff_factor, growth_interval, min_scale, max_scale});
      },
      py::arg("scale"), py::arg("growth_tracker"), py::arg("found_inf"), py::arg("growth_factor"),
      py::arg("backoff_factor"), py::arg("growth_interval"), py::arg("min_scale"), py::arg("max_scale"),
      release_gil(), "PyTorch's dynamic loss-scale update, in place on the device.");
  m.def("global_norm", &adcuda::global_norm, py::arg("arrays"), py::arg("norm_type"), py::arg("device"), release_gil(),
        "The norm_type-norm of all arrays' elements together: a 0-d float32 (float64) array on the device.");
}
