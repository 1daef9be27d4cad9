// The CPU backend's softmax, log_softmax and classifier (cross-entropy) forwards and the classifier's
// backward (adcuda/backends/cpu/softmax_loss.py) over C-contiguous float32/float64 arrays: one pass per row for
// the maximum, one for the sum of exponentials, one for the result, in the array's dtype. NumPy makes
// each of those a call of a microsecond or more on the small arrays of a per-op call, plus the
// temporaries; here the whole op is one call. The formulas are the NumPy path's, which stays the
// reference (tests/test_softmax_loss_host.py compares the two): the shift by the row's maximum (NaN
// and +inf propagate: a row holding them, or only -inf, is NaN throughout), exp, the sum, then
// e / sum or (x - max) - log(sum). Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "functors.cuh"
#include "host/torch_order_sum.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// NumPy's maximum: a NaN anywhere is the maximum.
template <typename T>
T row_max(const T* x, Index count, Index step) {
  T m = -std::numeric_limits<T>::infinity();
  for (Index i = 0; i < count; ++i) {
    const T v = x[i * step];
    if (v > m || v != v) m = v;
    if (m != m) break;
  }
  return m;
}

// y = softmax (or log_softmax) of x along rows of ``count`` elements ``step`` apart, every (outer, inner).
template <typename T>
void softmax_rows(const T* x, T* y, Index outer, Index count, Index inner, bool log) {
  for (Index o = 0; o < outer; ++o) {
    for (Index j = 0; j < inner; ++j) {
      const T* in = x + o * count * inner + j;
      T* out = y + o * count * inner + j;
      const T m = row_max(in, count, inner);
      T sum = T(0);
      for (Index i = 0; i < count; ++i) {
        const T shifted = in[i * inner] - m;
        const T e = math::exp_(shifted);
        out[i * inner] = log ? shifted : e;
        sum += e;
      }
      if (log) {
        const T log_sum = math::log_(sum);
        for (Index i = 0; i < count; ++i) out[i * inner] -= log_sum;
      } else {
        for (Index i = 0; i < count; ++i) out[i * inner] /= sum;
      }
    }
  }
}

template <typename T>
py::array_t<T> softmax_of(const py::array_t<T, py::array::c_style>& x, Index axis, bool log) {
  if (axis < 0 || axis >= x.ndim()) throw std::invalid_argument("cpu_softmax: axis out of range");
  Index outer = 1, inner = 1;
  for (Index d = 0; d < axis; ++d) outer *= x.shape(d);
  for (Index d = axis + 1; d < x.ndim(); ++d) inner *= x.shape(d);
  py::array_t<T> y(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const T* in = x.data();
  T* out = y.mutable_data();
  const Index count = x.shape(axis);
  {
    py::gil_scoped_release release;
    softmax_rows(in, out, outer, count, inner, log);
  }
  return y;
}

// Per-row cross-entropy losses and (shift, log-sum) statistics of logits (N, C) against int64 class
// indices (N,): classifier_loss's formula (adcuda/backends/cpu/softmax_loss.py). Throws IndexError
// for a target outside [0, C) that is not ignore_index (the caller then lets the NumPy path name it).
template <typename T>
py::tuple classifier_loss(const py::array_t<T, py::array::c_style>& logits,
                          const py::array_t<std::int64_t, py::array::c_style>& target,
                          const std::optional<py::array_t<T, py::array::c_style>>& weight, std::int64_t ignore_index,
                          double label_smoothing) {
  if (logits.ndim() != 2 || target.ndim() != 1 || target.shape(0) != logits.shape(0))
    throw std::invalid_argument("cpu_classifier_loss: expected (N, C) logits and (N,) targets");
  const Index n = logits.shape(0), c = logits.shape(1);
  if (weight && (weight->ndim() != 1 || weight->shape(0) != c))
    throw std::invalid_argument("cpu_classifier_loss: expected (C,) class weights");
  const std::int64_t* t = target.data();
  for (Index r = 0; r < n; ++r) {
    if (t[r] != ignore_index && (t[r] < 0 || t[r] >= c)) throw py::index_error("cpu_classifier_loss: target out of range");
  }
  py::array_t<T> losses(std::vector<py::ssize_t>{n});
  py::array_t<T> stats(std::vector<py::ssize_t>{n, 2});
  const T* x = logits.data();
  const T* w = weight ? weight->data() : nullptr;
  T* loss = losses.mutable_data();
  T* stat = stats.mutable_data();
  {
    py::gil_scoped_release release;
    const T keep = T(1.0 - label_smoothing), smooth = c ? T(label_smoothing / double(c)) : T(0);
    T total_weight = T(c);
    if (w != nullptr) {
      total_weight = T(0);
      for (Index k = 0; k < c; ++k) total_weight += w[k];
    }
    for (Index r = 0; r < n; ++r) {
      const T* row = x + r * c;
      const T m = row_max(row, c, 1);
      T sum = T(0), weighted = T(0);
      for (Index k = 0; k < c; ++k) {
        const T shifted = row[k] - m;
        sum += math::exp_(shifted);
        if (label_smoothing != 0.0) weighted += w != nullptr ? w[k] * shifted : shifted;
      }
      const T log_sum = math::log_(sum);
      stat[2 * r] = std::isfinite(m) ? m : T(0);
      stat[2 * r + 1] = log_sum;
      if (t[r] == ignore_index) {
        loss[r] = T(0);
        continue;
      }
      T value = keep * (log_sum - (row[t[r]] - m));
      if (w != nullptr) value *= w[t[r]];
      if (label_smoothing != 0.0) value += smooth * (total_weight * log_sum - weighted);
      loss[r] = value;
    }
  }
  return py::make_tuple(losses, stats);
}

// The gradient w.r.t. the logits of classifier_loss's per-row losses (the CPU backend's
// classifier_loss_backward, whose NumPy path's operations this makes in the same order and dtype, an element
// at a time): p = exp((x - m) - log_sum) from the forward's statistics, minus the smoothed one-hot target
// (with class weights: times keep w[t] + smooth W, minus keep w[t] at the target and smooth w everywhere),
// times the row's loss gradient, or times 0 for an ignored row. One pass over the logits where NumPy makes
// eight calls and two fancy-indexed gathers (a small classifier's backward: 100 us -> a few). IndexError
// for a target outside [0, C) that is not ignore_index (the caller then lets the NumPy path name it).
template <typename T>
py::array_t<T> classifier_loss_backward(const py::array_t<T, py::array::c_style>& logits,
                                        const py::array_t<T, py::array::c_style>& stats,
                                        const py::array_t<std::int64_t, py::array::c_style>& target,
                                        const std::optional<py::array_t<T, py::array::c_style>>& weight,
                                        const py::array_t<T, py::array::c_style>& g_rows, std::int64_t ignore_index,
                                        double label_smoothing) {
  if (logits.ndim() != 2 || target.ndim() != 1 || target.shape(0) != logits.shape(0))
    throw std::invalid_argument("cpu_classifier_loss_backward: expected (N, C) logits and (N,) targets");
  const Index n = logits.shape(0), c = logits.shape(1);
  if (stats.size() != 2 * n || g_rows.size() != n || (weight && (weight->ndim() != 1 || weight->shape(0) != c)))
    throw std::invalid_argument("cpu_classifier_loss_backward: statistics, row gradients or weights do not fit");
  const std::int64_t* t = target.data();
  for (Index r = 0; r < n; ++r) {
    if (t[r] != ignore_index && (t[r] < 0 || t[r] >= c))
      throw py::index_error("cpu_classifier_loss_backward: target out of range");
  }
  py::array_t<T> grads(std::vector<py::ssize_t>{n, c});
  const T* x = logits.data();
  const T* stat = stats.data();
  const T* g = g_rows.data();
  const T* w = weight ? weight->data() : nullptr;
  T* out = grads.mutable_data();
  {
    py::gil_scoped_release release;
    const T keep = T(1.0 - label_smoothing), smooth = c ? T(label_smoothing / double(c)) : T(0);
    T total_weight = T(0);
    if (w != nullptr)
      for (Index k = 0; k < c; ++k) total_weight += w[k];
    for (Index r = 0; r < n; ++r) {
      const T* row = x + r * c;
      T* d = out + r * c;
      const T m = stat[2 * r], log_sum = stat[2 * r + 1];
      for (Index k = 0; k < c; ++k) d[k] = math::exp_(T(row[k] - m) - log_sum);
      const bool valid = t[r] != ignore_index;
      const Index at = valid ? t[r] : 0;
      if (w == nullptr) {
        const T at_target = d[at] - T(keep + smooth);
        if (label_smoothing != 0.0)
          for (Index k = 0; k < c; ++k) d[k] -= smooth;
        if (valid) d[at] = at_target;
      } else {
        const T factor = T(keep * w[at]) + T(smooth * total_weight);
        for (Index k = 0; k < c; ++k) d[k] *= factor;
        if (valid) d[at] -= T(keep * w[at]);
        if (label_smoothing != 0.0)
          for (Index k = 0; k < c; ++k) d[k] -= T(smooth * w[k]);
      }
      const T scale = valid ? g[r] : T(0);
      for (Index k = 0; k < c; ++k) d[k] *= scale;
    }
  }
  return grads;
}

// reduction codes of the loss primitives below: the per-row losses, their mean or their sum
enum Reduction { kNone = 0, kMean = 1, kSum = 2 };

Reduction reduction_code(const std::string& reduction) {
  if (reduction == "none") return kNone;
  if (reduction == "mean") return kMean;
  if (reduction == "sum") return kSum;
  throw std::invalid_argument("unknown reduction " + reduction);
}

// The reduced result: the (N,) losses themselves, or their sum (over ``divisor`` for a mean) as a 0-d
// array; sums are accumulated in double and rounded once.
template <typename T>
py::array_t<T> reduced(const std::vector<double>& rows, Reduction reduction, double divisor) {
  if (reduction == kNone) {
    py::array_t<T> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows.size())});
    T* o = out.mutable_data();
    for (std::size_t r = 0; r < rows.size(); ++r) o[r] = T(rows[r]);
    return out;
  }
  double total = 0.0;
  for (const double v : rows) total += v;
  py::array_t<T> out(std::vector<py::ssize_t>{});
  *out.mutable_data() = T(reduction == kMean ? total / divisor : total);
  return out;
}

// The class losses' arguments: scores (N, C), int64 targets (N,) each in [0, C) or equal to ``ignore``
// where one is given (IndexError otherwise: the caller's NumPy path names it), optional class weights
// (C,) -> C.
template <typename T>
Index checked_classes(const char* op, const py::array_t<T, py::array::c_style>& scores,
                      const py::array_t<std::int64_t, py::array::c_style>& target,
                      const std::optional<py::array_t<T, py::array::c_style>>& weight,
                      std::optional<std::int64_t> ignore) {
  if (scores.ndim() != 2 || target.ndim() != 1 || target.shape(0) != scores.shape(0))
    throw std::invalid_argument(std::string(op) + ": expected (N, C) scores and (N,) targets");
  const Index n = scores.shape(0), c = scores.shape(1);
  if (weight && (weight->ndim() != 1 || weight->shape(0) != c))
    throw std::invalid_argument(std::string(op) + ": expected (C,) class weights");
  const std::int64_t* t = target.data();
  for (Index r = 0; r < n; ++r) {
    if ((!ignore || t[r] != *ignore) && (t[r] < 0 || t[r] >= c))
      throw py::index_error(std::string(op) + ": target out of range");
  }
  return c;
}

// nll_loss of log-probabilities (N, C) against int64 class indices (N,), optional class weights (C,):
// each row's -w[t] * logp[t] (0 where t == ignore_index), reduced; and the summed weights of the rows
// that count (the mean's divisor). The CPU backend's nll_loss (adcuda/backends/cpu/softmax_loss.py).
template <typename T>
py::tuple nll_loss(const py::array_t<T, py::array::c_style>& logp,
                   const py::array_t<std::int64_t, py::array::c_style>& target,
                   const std::optional<py::array_t<T, py::array::c_style>>& weight, std::int64_t ignore_index,
                   const std::string& reduction_name) {
  const Index n = logp.shape(0), c = checked_classes("cpu_nll_loss", logp, target, weight, ignore_index);
  const Reduction reduction = reduction_code(reduction_name);
  const std::int64_t* t = target.data();
  const T* x = logp.data();
  const T* w = weight ? weight->data() : nullptr;
  std::vector<double> rows(static_cast<std::size_t>(n), 0.0);
  double total_weight = 0.0;
  for (Index r = 0; r < n; ++r) {
    if (t[r] == ignore_index) continue;
    const T row_weight = w != nullptr ? w[t[r]] : T(1);
    rows[r] = double(-(row_weight * x[r * c + t[r]]));  // rounded in T, as the elementwise product is
    total_weight += double(row_weight);
  }
  py::array_t<T> total(std::vector<py::ssize_t>{});
  *total.mutable_data() = T(total_weight);
  return py::make_tuple(reduced<T>(rows, reduction, total_weight), total);
}

// multi_margin_loss of scores (N, C) against int64 class indices (N,): each row's
// sum over j != t of w[t] * max(0, margin - x[t] + x[j]) ** p, over C (a NaN hinge adds nothing, as in
// PyTorch), reduced (the mean over N). The CPU backend's multi_margin_loss.
template <typename T>
py::array_t<T> multi_margin_loss(const py::array_t<T, py::array::c_style>& scores,
                                 const py::array_t<std::int64_t, py::array::c_style>& target, int p, double margin,
                                 const std::optional<py::array_t<T, py::array::c_style>>& weight,
                                 const std::string& reduction_name) {
  if (p != 1 && p != 2) throw std::invalid_argument("cpu_multi_margin_loss: p must be 1 or 2");
  const Index n = scores.shape(0),
              c = checked_classes("cpu_multi_margin_loss", scores, target, weight, std::nullopt);
  const Reduction reduction = reduction_code(reduction_name);
  const std::int64_t* t = target.data();
  const T* x = scores.data();
  const T* w = weight ? weight->data() : nullptr;
  const T m = T(margin);
  std::vector<double> rows(static_cast<std::size_t>(n), 0.0);
  for (Index r = 0; r < n; ++r) {
    const T* row = x + r * c;
    const T at_target = row[t[r]];
    T sum = T(0);
    for (Index j = 0; j < c; ++j) {
      if (j == t[r]) continue;
      T hinge = (m - at_target) + row[j];
      if (!(hinge > T(0))) continue;  // PyTorch's test: a NaN hinge adds nothing
      if (p == 2) hinge *= hinge;
      if (w != nullptr) hinge *= w[t[r]];
      sum += hinge;
    }
    rows[r] = double(sum / T(c));
  }
  return reduced<T>(rows, reduction, double(n));
}

// The elementwise losses of cpu_pointwise_loss, each the formula of its op's terms in
// adcuda/ops/softmax_loss.py, rounded at each step in T as the backend's primitives round them there
enum PointwiseLoss { kBinaryCrossEntropy = 0, kKlDiv = 1, kKlDivLogTarget = 2, kHuber = 3, kSmoothL1 = 4 };

template <typename T>
T log_above_100(T log) {
  return log < T(-100) ? T(-100) : log;  // (PyTorch's bound on binary_cross_entropy's logs; NaN stays NaN)
}

// n terms of loss `kind` of x against t into out (param: huber's delta, smooth L1's beta); false where
// a binary cross-entropy probability or target lies outside [0, 1] (a NaN does: PyTorch's check is
// 0 <= v <= 1)
template <typename T>
bool pointwise_terms(int kind, const T* x, const T* t, double param, Index n, T* out) {
  switch (kind) {
    case kBinaryCrossEntropy:
      for (Index i = 0; i < n; ++i)
        if (!(x[i] >= T(0) && x[i] <= T(1) && t[i] >= T(0) && t[i] <= T(1))) return false;
      // (t - 1) log(1 - p) - t log(p)
      for (Index i = 0; i < n; ++i)
        out[i] = (t[i] - T(1)) * log_above_100(math::log1p_(-x[i])) - t[i] * log_above_100(math::log_(x[i]));
      return true;
    case kKlDiv:  // t log t - t x, with 0 for t log t where t = 0 (the log then reads 1; a negative t's is NaN)
      for (Index i = 0; i < n; ++i) out[i] = t[i] * math::log_(t[i] != T(0) ? t[i] : T(1)) - t[i] * x[i];
      return true;
    case kKlDivLogTarget:  // exp(t) (t - x)
      for (Index i = 0; i < n; ++i) out[i] = math::exp_(t[i]) * (t[i] - x[i]);
      return true;
    case kHuber:
    case kSmoothL1: {
      // |d| = |x - t|, then 0.5 d**2 / beta (huber: 0.5 d**2) where |d| < beta, else |d| - 0.5 beta
      // (huber: beta (|d| - 0.5 beta)), the scalars rounded to T as the primitives take them
      const bool huber = kind == kHuber;
      const T beta = T(param), half = T(huber ? 0.5 : 0.5 / param), half_beta = T(0.5 * param);
      for (Index i = 0; i < n; ++i) {
        const T d = std::abs(x[i] - t[i]);
        const T linear = huber ? beta * (d - half_beta) : d - half_beta;
        out[i] = d < beta ? (half * d) * d : linear;
      }
      return true;
    }
    default:
      throw std::invalid_argument("cpu_pointwise_loss: unknown loss " + std::to_string(kind));
  }
}

// cpu_pointwise_loss: the terms (divisor 0), or their sum in PyTorch's order (divisor 1), or that sum
// divided by divisor (a mean, batchmean) as a 0-d array; None where pointwise_terms refuses
template <typename T>
py::object pointwise_loss(int kind, const py::array& x, const py::array& t, double param, double divisor) {
  const Index n = x.size();
  const T* in = static_cast<const T*>(x.data());
  const T* target = static_cast<const T*>(t.data());
  if (divisor == 0.0) {
    py::array out(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    if (!pointwise_terms(kind, in, target, param, n, static_cast<T*>(out.mutable_data()))) return py::none();
    return std::move(out);
  }
  if (n == 0) throw std::invalid_argument("cpu_pointwise_loss: no terms to reduce");
  // (a small batch's terms on the stack: no allocation)
  constexpr Index kOnStack = 256;
  T stack[kOnStack];
  std::vector<T> heap(n > kOnStack ? static_cast<std::size_t>(n) : 0);
  T* terms = n > kOnStack ? heap.data() : stack;
  if (!pointwise_terms(kind, in, target, param, n, terms)) return py::none();
  T total = torch_order_sum(terms, static_cast<std::size_t>(n));
  if (divisor != 1.0) total = total / T(divisor);
  py::array out(x.dtype(), std::vector<py::ssize_t>{});
  *static_cast<T*>(out.mutable_data()) = total;
  return std::move(out);
}

// pointwise_loss over x's dtype, after the checks of its arguments' kinds (one entry: a pybind11
// overload per dtype cost half a microsecond per refused overload)
py::object pointwise_loss_of(int kind, const py::array& x, const py::array& t, double param, double divisor) {
  const bool c_style = (x.flags() & py::array::c_style) && (t.flags() & py::array::c_style);
  if (!c_style || !x.dtype().is(t.dtype()) || t.ndim() != x.ndim() ||
      !std::equal(x.shape(), x.shape() + x.ndim(), t.shape()))
    throw py::type_error("cpu_pointwise_loss: x and t must be C-contiguous arrays of one dtype and shape");
  if (x.dtype().equal(py::dtype::of<float>())) return pointwise_loss<float>(kind, x, t, param, divisor);
  if (x.dtype().equal(py::dtype::of<double>())) return pointwise_loss<double>(kind, x, t, param, divisor);
  throw py::type_error("cpu_pointwise_loss: x must be float32 or float64");
}

// glu's a * sigmoid(b) of x viewed as (outer, 2 half, inner), its halves a and b along the middle dim, into
// out (outer, half, inner): the functor host_unary's sigmoid applies, then one product, as the backend's
// primitives round them
template <typename T>
void glu_halves(const T* x, T* out, Index outer, Index half, Index inner) {
  const math::Sigmoid gate;
  const Index block = half * inner;
  for (Index o = 0; o < outer; ++o) {
    const T* a = x + o * 2 * block;
    const T* b = a + block;
    T* y = out + o * block;
    for (Index i = 0; i < block; ++i) y[i] = a[i] * gate(b[i]);
  }
}

// cpu_glu: x (C-contiguous float32/float64) halved along axis (of an even size)
py::array glu_of(const py::array& x, py::ssize_t axis) {
  static const int single = py::dtype::of<float>().num(), twice = py::dtype::of<double>().num();
  const int num = x.dtype().num();
  if (!(x.flags() & py::array::c_style) || (num != single && num != twice))
    throw py::type_error("cpu_glu: x must be a C-contiguous float32 or float64 array");
  if (axis < 0 || axis >= x.ndim() || x.shape(axis) % 2)
    throw std::invalid_argument("cpu_glu: axis must be a dim of x of an even size");
  std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
  Index outer = 1, inner = 1;
  for (py::ssize_t d = 0; d < axis; ++d) outer *= shape[d];
  for (py::ssize_t d = axis + 1; d < x.ndim(); ++d) inner *= shape[d];
  shape[axis] /= 2;
  py::array out(x.dtype(), shape);
  if (num == single)
    glu_halves(static_cast<const float*>(x.data()), static_cast<float*>(out.mutable_data()), outer, shape[axis], inner);
  else
    glu_halves(static_cast<const double*>(x.data()), static_cast<double*>(out.mutable_data()), outer, shape[axis],
               inner);
  return out;
}

}  // namespace

void bind_softmax_loss(py::module_& m) {
  m.def("cpu_glu", &glu_of, py::arg("x"), py::arg("axis"),
        "glu of a C-contiguous float32/float64 array along axis (a dim of an even size): the first half times "
        "the sigmoid (host_unary's functor) of the second, in its dtype.");
  m.def("cpu_pointwise_loss", &pointwise_loss_of, py::arg("kind"), py::arg("x"), py::arg("t"), py::arg("param"),
        py::arg("divisor"),
        "The elementwise loss `kind` (0 binary cross-entropy, 1 KL divergence, 2 KL divergence of log targets, 3 "
        "Huber of delta param, 4 smooth L1 of beta param) of C-contiguous float32/float64 x against t of x's dtype "
        "and shape: the terms in x's shape (divisor 0), else their sum in PyTorch's order over divisor (1: the sum) "
        "as a 0-d array; None where a binary cross-entropy value lies outside [0, 1].");
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  m.def("cpu_softmax", &softmax_of<float>, py::arg("x").noconvert(), py::arg("axis"), py::arg("log"));
  m.def("cpu_softmax", &softmax_of<double>, py::arg("x").noconvert(), py::arg("axis"), py::arg("log"),
        "softmax (log: log_softmax) of a C-contiguous float32/float64 array along ``axis`` (0 <= axis < ndim), in "
        "its dtype.");
  m.def("cpu_classifier_loss", &classifier_loss<float>, py::arg("logits").noconvert(), py::arg("target").noconvert(),
        py::arg("weight").noconvert(), py::arg("ignore_index"), py::arg("label_smoothing"));
  m.def("cpu_classifier_loss_backward", &classifier_loss_backward<float>, py::arg("logits").noconvert(),
        py::arg("stats").noconvert(), py::arg("target").noconvert(), py::arg("weight").noconvert(),
        py::arg("g_rows").noconvert(), py::arg("ignore_index"), py::arg("label_smoothing"));
  m.def("cpu_classifier_loss_backward", &classifier_loss_backward<double>, py::arg("logits").noconvert(),
        py::arg("stats").noconvert(), py::arg("target").noconvert(), py::arg("weight").noconvert(),
        py::arg("g_rows").noconvert(), py::arg("ignore_index"), py::arg("label_smoothing"),
        "The gradient (N, C) w.r.t. C-contiguous float32/float64 logits of cpu_classifier_loss's per-row losses, "
        "given its statistics (N, 2), the int64 targets (N,), optional class weights (C,) and the row gradients "
        "(N,), all of the logits' dtype: the CPU backend's classifier_loss_backward. IndexError for a target out "
        "of range.");
  m.def("cpu_classifier_loss", &classifier_loss<double>, py::arg("logits").noconvert(),
        py::arg("target").noconvert(), py::arg("weight").noconvert(), py::arg("ignore_index"),
        py::arg("label_smoothing"),
        "(losses (N,), statistics (N, 2)) of C-contiguous float32/float64 logits (N, C) against int64 class indices "
        "(N,), optional class weights (C,) of the logits' dtype: the CPU backend's classifier_loss. IndexError for "
        "a target out of range.");
  m.def("cpu_nll_loss", &nll_loss<float>, py::arg("logp").noconvert(), py::arg("target").noconvert(),
        py::arg("weight").noconvert(), py::arg("ignore_index"), py::arg("reduction"));
  m.def("cpu_nll_loss", &nll_loss<double>, py::arg("logp").noconvert(), py::arg("target").noconvert(),
        py::arg("weight").noconvert(), py::arg("ignore_index"), py::arg("reduction"),
        "(loss, total weight) of C-contiguous float32/float64 log-probabilities (N, C) against int64 class indices "
        "(N,), optional class weights (C,) of their dtype: the CPU backend's nll_loss. IndexError for a target out "
        "of range.");
  m.def("cpu_multi_margin_loss", &multi_margin_loss<float>, py::arg("scores").noconvert(),
        py::arg("target").noconvert(), py::arg("p"), py::arg("margin"), py::arg("weight").noconvert(),
        py::arg("reduction"));
  m.def("cpu_multi_margin_loss", &multi_margin_loss<double>, py::arg("scores").noconvert(),
        py::arg("target").noconvert(), py::arg("p"), py::arg("margin"), py::arg("weight").noconvert(),
        py::arg("reduction"),
        "multi_margin_loss of C-contiguous float32/float64 scores (N, C) against int64 class indices (N,), optional "
        "class weights (C,) of their dtype: the CPU backend's multi_margin_loss. IndexError for a target out of "
        "range.");
}

}  // namespace adcuda::host
