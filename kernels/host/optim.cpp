// The CPU backend's SGD and Adam steps over float32 tensors (adcuda/backends/cpu/optim.py): one pass per
// tensor. NumPy makes a dozen passes for an Adam update (each operation of PyTorch's order a whole-array
// ufunc with a temporary) and three through a float64 temporary for each of SGD's fused multiply-adds;
// here each element is read and written once, with the same operations in the same order and the same
// roundings, so the results are bit for bit the NumPy path's (tests/test_cpu_fast_paths.py compares
// them). This file is compiled with -ffp-contract=off (CMakeLists.txt): a contracted a * b + c would
// round once where NumPy rounds twice. Built in every install, with or without CUDA; calls release the
// GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
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

// y + alpha * x rounded as the NumPy path rounds it (PyTorch's fused y.add(x, alpha=)): the product of
// a float32 and alpha rounded to float32 is exact in double, the sum is rounded to double and then
// to float32.
inline float fused_add(float y, float x, double alpha) {
  const double product = static_cast<double>(x) * alpha;
  const double sum = product + static_cast<double>(y);
  return static_cast<float>(sum);
}

// alpha as the NumPy path widens it: rounded to float32 first (np.float64(np.float32(alpha))).
inline double as_float32(double alpha) { return static_cast<double>(static_cast<float>(alpha)); }

struct Sgd {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};

void sgd_tensor(float* w, const float* g, float* buf, Index n, const Sgd& c) {
  const double decay = as_float32(c.weight_decay), damped = as_float32(1.0 - c.dampening);
  const double nesterov = as_float32(c.momentum), step = as_float32(-c.lr);
  const float momentum = static_cast<float>(c.momentum);
  for (Index i = 0; i < n; ++i) {
    float d = g[i];
    if (c.weight_decay != 0.0) d = fused_add(d, w[i], decay);
    if (c.momentum != 0.0) {
      float b = d;
      if (!c.first_step) {
        b = buf[i] * momentum;
        b = c.dampening != 0.0 ? fused_add(b, d, damped) : b + d;
      }
      buf[i] = b;
      d = c.nesterov ? fused_add(d, b, nesterov) : b;
    }
    w[i] = fused_add(w[i], d, step);
  }
}

struct Adam {
  double lr, beta1, beta2, eps, weight_decay, bias_correction2_sqrt, step_size;
  bool decoupled;
};

// NumPy's maximum: NaN where either is NaN (a select, so the loop still vectorises)
inline float nan_maximum(float a, float b) { return (a != a || a > b) ? a : b; }

// One tensor's update; the options are template parameters so that the loop has no branch and vectorises.
template <bool kDecayWeights, bool kDecayGradient, bool kAmsgrad>
void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  // each Python scalar meets a float32 array as NumPy 2 takes a Python float: rounded to float32
  const float keep = static_cast<float>(1.0 - c.lr * c.weight_decay), decay = static_cast<float>(c.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - c.beta1), beta2 = static_cast<float>(c.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  const float correction = static_cast<float>(c.bias_correction2_sqrt), eps = static_cast<float>(c.eps);
  const float step_size = static_cast<float>(c.step_size);
  for (Index i = 0; i < n; ++i) {
    float wi = w[i], d = g[i];
    if constexpr (kDecayWeights) wi *= keep;
    if constexpr (kDecayGradient) {
      const float decayed = wi * decay;
      d = d + decayed;
    }
    float t = d - m[i];
    t *= one_minus_beta1;
    const float mi = m[i] + t;
    m[i] = mi;
    float vi = v[i] * beta2;
    t = d * d;
    t *= one_minus_beta2;
    vi += t;
    v[i] = vi;
    if constexpr (kAmsgrad) {
      vi = nan_maximum(max_v[i], vi);
      max_v[i] = vi;
    }
    t = std::sqrt(vi);
    t /= correction;
    t += eps;
    t = mi / t;
    t *= step_size;
    w[i] = wi - t;
  }
}

template <bool kDecayWeights, bool kDecayGradient>
void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  if (max_v != nullptr)
    adam_tensor<kDecayWeights, kDecayGradient, true>(w, g, m, v, max_v, n, c);
  else
    adam_tensor<kDecayWeights, kDecayGradient, false>(w, g, m, v, max_v, n, c);
}

void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  if (c.weight_decay == 0.0)
    adam_tensor<false, false>(w, g, m, v, max_v, n, c);
  else if (c.decoupled)
    adam_tensor<true, false>(w, g, m, v, max_v, n, c);
  else
    adam_tensor<false, true>(w, g, m, v, max_v, n, c);
}

}  // namespace

void bind_optim(py::module_& m) {
  m.def(
      "cpu_sgd_step_",
      [](const py::list& params, const py::list& grads, const py::object& bufs, double lr, double momentum,
         double dampening, bool nesterov, double weight_decay, bool first_step) {
        const char* op = "cpu_sgd_step_";
        std::vector<Index> sizes;
        auto w = float32_data(op, params, true, sizes);
        auto g = float32_data(op, grads, false, sizes);
        auto b = float32_data(op, bufs, true, sizes);
        if (g.size() != w.size() || (momentum != 0.0 && b.size() != w.size()))
          throw std::invalid_argument("cpu_sgd_step_: every parameter needs its gradient (and buffer, with momentum)");
        const Sgd c{lr, momentum, dampening, weight_decay, nesterov, first_step};
        py::gil_scoped_release release;
        for (std::size_t k = 0; k < w.size(); ++k) sgd_tensor(w[k], g[k], b.empty() ? nullptr : b[k], sizes[k], c);
      },
      py::arg("params"), py::arg("grads"), py::arg("bufs"), py::arg("lr"), py::arg("momentum"), py::arg("dampening"),
      py::arg("nesterov"), py::arg("weight_decay"), py::arg("first_step"),
      "SGD over lists of C-contiguous float32 arrays, in place: the CPU backend's sgd_step_ in one pass a tensor.");
  m.def(
      "cpu_adam_step_",
      [](const py::list& params, const py::list& grads, const py::list& exp_avgs, const py::list& exp_avg_sqs,
         const py::object& max_exp_avg_sqs, double lr, double beta1, double beta2, double eps, double weight_decay,
         bool decoupled, double bias_correction2_sqrt, double step_size) {
        const char* op = "cpu_adam_step_";
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
          adam_tensor(w[k], g[k], m1[k], m2[k], mx.empty() ? nullptr : mx[k], sizes[k], c);
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"),
      py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("decoupled"),
      py::arg("bias_correction2_sqrt"), py::arg("step_size"),
      "Adam/AdamW (AMSGrad with max_exp_avg_sqs) over lists of C-contiguous float32 arrays, in place: the CPU "
      "backend's adam_step_ with its state in float32, in one pass a tensor.");
}

}  // namespace adcuda::host
