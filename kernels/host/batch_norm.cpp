// The CPU backend's batch norm in training, forward and backward (adcuda/backends/cpu/norm.py), over
// C-contiguous float32/float64 arrays viewed as (N, C, S): the formulas of kernels/norm.cu's
// batch_norm_*_kernel (two passes for the statistics, the mean then the mean of squared deviations;
// one pass of two sums for the backward; an elementwise pass for y or dx), each channel's N rows of S
// values read in place. NumPy needs five passes over x for the forward and eight for the backward (a
// temporary each); here three and two. The NumPy path stays the reference (tests/test_norm_host.py
// compares the two). Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

// the arrays a call reads: C-contiguous, of one dtype (pybind11 converts nothing: noconvert below)
template <typename T>
using Array = py::array_t<T, py::array::c_style>;
using Index = std::int64_t;

// Eight running sums of f(k) over a row of ``length``, added in double at the end: independent lanes the
// compiler vectorises, the row's total exact enough in T (S values of a plane), the channel's in double.
template <typename T, typename F>
double row_sum(Index length, F f) {
  constexpr int kLanes = 8;
  T lanes[kLanes] = {};
  Index k = 0;
  for (; k + kLanes <= length; k += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += f(k + l);
  double total = 0.0;
  for (; k < length; ++k) total += double(f(k));
  for (int l = 0; l < kLanes; ++l) total += double(lanes[l]);
  return total;
}

struct Planes {
  Index n, c, s;
};

Planes planes_of(const py::array& x, const char* op) {
  if (x.ndim() < 2) throw std::invalid_argument(std::string(op) + ": x must have a channel dimension");
  Index s = 1;
  for (py::ssize_t d = 2; d < x.ndim(); ++d) s *= x.shape(d);
  return {x.shape(0), x.shape(1), s};
}

template <typename T>
const T* channel_param(const std::optional<Array<T>>& p, Index c, const char* op) {
  if (!p) return nullptr;
  if (p->size() != c) throw std::invalid_argument(std::string(op) + ": a parameter does not fit the channels");
  return p->data();
}

// A call's results: a new array of x's shape and two of (C,), all of x's dtype.
template <typename T>
struct Results {
  py::array_t<T> full, first, second;
  Results(const py::array& x, Index c)
      : full(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim())),
        first(std::vector<py::ssize_t>{c}),
        second(std::vector<py::ssize_t>{c}) {}
};

// -> (y, mean (C,), rstd (C,)): y = (x - mean) * rstd * weight + bias per channel.
template <typename T>
py::tuple batch_norm(const Array<T>& x, const std::optional<Array<T>>& weight, const std::optional<Array<T>>& bias,
                     double eps) {
  const Planes p = planes_of(x, "cpu_batch_norm");
  const T* w = channel_param(weight, p.c, "cpu_batch_norm");
  const T* b = channel_param(bias, p.c, "cpu_batch_norm");
  Results<T> results(x, p.c);
  const T* in = x.data();
  T *out = results.full.mutable_data(), *mean_out = results.first.mutable_data();
  T* rstd_out = results.second.mutable_data();
  const double count = double(p.n * p.s);
  {
    py::gil_scoped_release release;
    for (Index c = 0; c < p.c; ++c) {
      double sum = 0.0;
      for (Index n = 0; n < p.n; ++n) {
        const T* row = in + (n * p.c + c) * p.s;
        sum += row_sum<T>(p.s, [row](Index k) { return row[k]; });
      }
      const T mean = T(sum / count);  // an empty batch: 0 / 0, NaN statistics as NumPy's
      double squares = 0.0;
      for (Index n = 0; n < p.n; ++n) {
        const T* row = in + (n * p.c + c) * p.s;
        squares += row_sum<T>(p.s, [row, mean](Index k) { return (row[k] - mean) * (row[k] - mean); });
      }
      const T rstd = T(1.0 / std::sqrt(squares / count + eps));
      mean_out[c] = mean;
      rstd_out[c] = rstd;
      const T scale = w != nullptr ? rstd * w[c] : rstd, shift = b != nullptr ? b[c] : T(0);
      for (Index n = 0; n < p.n; ++n) {
        const T* row = in + (n * p.c + c) * p.s;
        T* yr = out + (n * p.c + c) * p.s;
        for (Index k = 0; k < p.s; ++k) yr[k] = (row[k] - mean) * scale + shift;
      }
    }
  }
  return py::make_tuple(results.full, results.first, results.second);
}

// -> (dx, dweight (None without a weight), dbias): dx = rstd * w * (g - mean(g) - xhat * mean(g * xhat)),
// the means over the channel's N * S values; dweight = sum(g * xhat), dbias = sum(g).
template <typename T>
py::tuple batch_norm_backward(const Array<T>& g, const Array<T>& x, const std::optional<Array<T>>& weight,
                              const Array<T>& mean, const Array<T>& rstd) {
  const Planes p = planes_of(x, "cpu_batch_norm_backward");
  if (g.ndim() != x.ndim() || !std::equal(x.shape(), x.shape() + x.ndim(), g.shape()) || mean.size() != p.c ||
      rstd.size() != p.c)
    throw std::invalid_argument("cpu_batch_norm_backward: g, mean or rstd does not fit x");
  const T* w = channel_param(weight, p.c, "cpu_batch_norm_backward");
  Results<T> results(x, p.c);  // dx, dweight, dbias
  const T *gin = g.data(), *xin = x.data(), *mu = mean.data(), *rs = rstd.data();
  T *out = results.full.mutable_data(), *dw = results.first.mutable_data(), *db = results.second.mutable_data();
  const double count = double(p.n * p.s);
  {
    py::gil_scoped_release release;
    for (Index c = 0; c < p.c; ++c) {
      const T m = mu[c], r = rs[c];
      double sum_g = 0.0, sum_g_xc = 0.0;  // sum(g), sum(g * (x - mean)): dweight = rstd * the latter
      for (Index n = 0; n < p.n; ++n) {
        const T* gr = gin + (n * p.c + c) * p.s;
        const T* xr = xin + (n * p.c + c) * p.s;
        sum_g += row_sum<T>(p.s, [gr](Index k) { return gr[k]; });
        sum_g_xc += row_sum<T>(p.s, [gr, xr, m](Index k) { return gr[k] * (xr[k] - m); });
      }
      const T sum_g_xhat = T(sum_g_xc * double(r));
      db[c] = T(sum_g);
      dw[c] = sum_g_xhat;
      const T scale = w != nullptr ? r * w[c] : r;
      const T mean_g = T(sum_g / count), mean_g_xhat = T(double(sum_g_xhat) / count);
      for (Index n = 0; n < p.n; ++n) {
        const T* gr = gin + (n * p.c + c) * p.s;
        const T* xr = xin + (n * p.c + c) * p.s;
        T* dr = out + (n * p.c + c) * p.s;
        for (Index k = 0; k < p.s; ++k) dr[k] = scale * (gr[k] - mean_g - (xr[k] - m) * r * mean_g_xhat);
      }
    }
  }
  return py::make_tuple(results.full, w != nullptr ? py::object(results.first) : py::object(py::none()),
                        results.second);
}

template <typename T>
void bind_for(py::module_& m, const char* forward_doc, const char* backward_doc) {
  m.def("cpu_batch_norm", &batch_norm<T>, py::arg("x").noconvert(), py::arg("weight").noconvert(),
        py::arg("bias").noconvert(), py::arg("eps"), forward_doc);
  m.def("cpu_batch_norm_backward", &batch_norm_backward<T>, py::arg("g").noconvert(), py::arg("x").noconvert(),
        py::arg("weight").noconvert(), py::arg("mean").noconvert(), py::arg("rstd").noconvert(), backward_doc);
}

}  // namespace

void bind_batch_norm(py::module_& m) {
  bind_for<float>(m, "", "");
  bind_for<double>(m,
                   "(y, mean (C,), rstd (C,)) of a C-contiguous float32/float64 x (N, C, *) normalised per channel "
                   "with its batch statistics, times weight plus bias (optional, (C,), x's dtype).",
                   "(dx, dweight (None without a weight), dbias) of batch norm at x with its mean and rstd, all "
                   "C-contiguous, of x's dtype.");
}

}  // namespace adcuda::host
