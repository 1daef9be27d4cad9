// The CPU backend's group norm forward over small C-contiguous float32/float64 arrays, and its layer norm
// forward and backward over any (adcuda/backends/cpu/norm.py). Group norm: each row's mean and variance
// (two passes, accumulated in double), then the normalised row times its weight plus its bias, in the
// array's dtype; NumPy takes a dozen calls of a microsecond or more for that on the small arrays of a
// per-op call (np.mean alone adds a Python layer of several); here it is one. The NumPy paths stay the
// reference (tests/test_norm_host.py compares the two) and serve large group norm arrays, where its BLAS
// row sums are faster. Built in every install, with or without CUDA; calls release the GIL.
//
// Batch norm in training, forward and backward (adcuda/backends/cpu/norm.py), over
// C-contiguous float32/float64 arrays viewed as (N, C, S): the formulas of kernels/norm.cu's
// batch_norm_*_kernel (two passes for the statistics, the mean then the mean of squared deviations;
// one pass of two sums for the backward; an elementwise pass for y or dx), each channel's N rows of S
// values read in place. NumPy needs five passes over x for the forward and eight for the backward (a
// temporary each); here three and two. The NumPy path stays the reference (tests/test_norm_host.py
// compares the two). Built in every install, with or without CUDA; calls release the GIL.
//
// Pair distances (pdist, adcuda/backends/cpu/gemm.py): the p-norm of the difference of every pair of rows
// i < j of a C-contiguous float32/float64 matrix, in PyTorch's order and its dtype; one call where
// NumPy's gather, difference and norm take six of a microsecond each at a small pdist's sizes. NumPy's
// path stays the reference (tests/test_norm_host.py compares the two). The cross product of 3-vectors
// (cross, the same module) and the distances between the rows of two matrices (cdist, dist) likewise: one pass where NumPy's two gathers, product and difference take four calls.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "elementwise_avx2.h"
#define ADCUDA_HOST_ISA baseline
#include "layer_norm_loops.h"

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

using Index = std::int64_t;

template <typename T>
using Array = py::array_t<T, py::array::c_style>;

// Rows of ``count`` elements; row r's element k takes weight and bias number
// (r % groups) * per_group + k / spread (layer norm: one group, one per element; group norm: one per
// channel, ``spread`` the spatial size).
struct Rows {
  Index rows, count, groups, per_group, spread;
};

template <typename T>
py::tuple normalize(const Array<T>& x, const std::optional<Array<T>>& weight, const std::optional<Array<T>>& bias,
                    const Rows& r, double eps) {
  const Index params = r.groups * r.per_group;
  if (r.rows * r.count != x.size() || (weight && weight->size() != params) || (bias && bias->size() != params))
    throw std::invalid_argument("cpu_normalize: the rows, weight and bias do not fit the input");
  py::array_t<T> y(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array_t<T> means(std::vector<py::ssize_t>{r.rows}), rstds(std::vector<py::ssize_t>{r.rows});
  const T* in = x.data();
  const T* w = weight ? weight->data() : nullptr;
  const T* b = bias ? bias->data() : nullptr;
  T* out = y.mutable_data();
  T* mean_out = means.mutable_data();
  T* rstd_out = rstds.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index row = 0; row < r.rows; ++row) {
      const T* xr = in + row * r.count;
      T* yr = out + row * r.count;
      double sum = 0.0;
      for (Index k = 0; k < r.count; ++k) sum += double(xr[k]);
      const double mean = r.count ? sum / double(r.count) : NAN;
      double squares = 0.0;
      for (Index k = 0; k < r.count; ++k) {
        const double d = double(xr[k]) - mean;
        squares += d * d;
      }
      const T m = T(mean), rstd = T(1.0 / std::sqrt((r.count ? squares / double(r.count) : NAN) + eps));
      mean_out[row] = m;
      rstd_out[row] = rstd;
      const Index first = (row % r.groups) * r.per_group;
      for (Index k = 0; k < r.count; ++k) {
        T v = (xr[k] - m) * rstd;
        const Index p = first + k / r.spread;
        if (w != nullptr) v *= w[p];
        if (b != nullptr) v += b[p];
        yr[k] = v;
      }
    }
  }
  return py::make_tuple(y, means, rstds);
}

template <typename T>
void bind_for(py::module_& m, const char* doc) {
  m.def(
      "cpu_normalize",
      [](const Array<T>& x, const std::optional<Array<T>>& weight, const std::optional<Array<T>>& bias, Index rows,
         Index groups, Index spread, double eps) {
        if (rows < 0 || groups < 1 || spread < 1 || (rows && x.size() % rows))
          throw std::invalid_argument("cpu_normalize: bad rows, groups or spread");
        const Index count = rows ? x.size() / rows : 0;
        if (count % spread) throw std::invalid_argument("cpu_normalize: spread does not divide the rows");
        return normalize<T>(x, weight, bias, {rows, count, groups, count / spread, spread}, eps);
      },
      py::arg("x").noconvert(), py::arg("weight").noconvert(), py::arg("bias").noconvert(), py::arg("rows"),
      py::arg("groups"), py::arg("spread"), py::arg("eps"), doc);
}

// Layer norm, forward and backward, at every size (group norm keeps the loop above): the row loops of
// layer_norm_loops.h, in the build (baseline or AVX2) choose_avx2() picks.

template <typename T>
const T* optional_data(const std::optional<Array<T>>& a, Index size, const char* what) {
  if (!a) return nullptr;
  if (a->size() != size) throw std::invalid_argument(std::string("cpu_layer_norm: ") + what + " does not fit the rows");
  return a->data();
}

// (y, mean (rows,), rstd (rows,)) of x as ``rows`` rows; ``xhat``: where to write (x - mean) * rstd too.
template <typename T>
py::tuple layer_norm(const Array<T>& x, const std::optional<Array<T>>& weight, const std::optional<Array<T>>& bias,
                     Index rows, double eps, std::optional<Array<T>> xhat, std::optional<bool> avx2) {
  if (rows <= 0 || x.size() % rows) throw std::invalid_argument("cpu_layer_norm: bad rows");
  const Index count = x.size() / rows;
  const bool wide = choose_avx2("cpu_layer_norm", avx2);
  T* kept = nullptr;
  if (xhat) {
    if (xhat->size() != x.size()) throw std::invalid_argument("cpu_layer_norm: xhat does not fit x");
    kept = xhat->mutable_data();
  }
  py::array_t<T> y(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array_t<T> means(std::vector<py::ssize_t>{rows}), rstds(std::vector<py::ssize_t>{rows});
  const LayerNormRows<T> args{x.data(),           optional_data(weight, count, "weight"),
                              optional_data(bias, count, "bias"), y.mutable_data(),
                              kept,               means.mutable_data(),
                              rstds.mutable_data(), rows,
                              count,              eps};
  {
    py::gil_scoped_release release;
    wide ? avx2::layer_norm_rows(args) : baseline::layer_norm_rows(args);
  }
  return py::make_tuple(y, means, rstds);
}

// (dx, dweight or None, dbias) of layer_norm at x with row statistics mean and rstd; ``xhat``: the
// normalised x the forward kept, read instead of computed.
template <typename T>
py::tuple layer_norm_backward(const Array<T>& g, const Array<T>& x, const std::optional<Array<T>>& weight,
                              const Array<T>& mean, const Array<T>& rstd, Index rows,
                              const std::optional<Array<T>>& xhat, std::optional<bool> avx2) {
  if (rows <= 0 || x.size() % rows || g.size() != x.size() || mean.size() != rows || rstd.size() != rows)
    throw std::invalid_argument("cpu_layer_norm_backward: the arrays do not fit the rows");
  const Index count = x.size() / rows;
  const bool wide = choose_avx2("cpu_layer_norm_backward", avx2);
  const T* w = optional_data(weight, count, "weight");
  py::array_t<T> dx(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array_t<T> dweight(std::vector<py::ssize_t>{w == nullptr ? 0 : count}), dbias(std::vector<py::ssize_t>{count});
  const LayerNormGrads<T> args{g.data(),
                               x.data(),
                               w,
                               mean.data(),
                               rstd.data(),
                               optional_data(xhat, x.size(), "xhat"),
                               dx.mutable_data(),
                               w == nullptr ? nullptr : dweight.mutable_data(),
                               dbias.mutable_data(),
                               rows,
                               count};
  {
    py::gil_scoped_release release;
    wide ? avx2::layer_norm_backward_rows(args) : baseline::layer_norm_backward_rows(args);
  }
  return py::make_tuple(dx, w == nullptr ? py::object(py::none()) : py::object(dweight), dbias);
}

template <typename T>
void bind_layer_norm_for(py::module_& m, const char* forward_doc, const char* backward_doc) {
  m.def("cpu_layer_norm", &layer_norm<T>, py::arg("x").noconvert(), py::arg("weight").noconvert(),
        py::arg("bias").noconvert(), py::arg("rows"), py::arg("eps"), py::arg("xhat").noconvert(),
        py::arg("avx2") = py::none(), forward_doc);
  m.def("cpu_layer_norm_backward", &layer_norm_backward<T>, py::arg("g").noconvert(), py::arg("x").noconvert(),
        py::arg("weight").noconvert(), py::arg("mean").noconvert(), py::arg("rstd").noconvert(), py::arg("rows"),
        py::arg("xhat").noconvert(), py::arg("avx2") = py::none(), backward_doc);
}

}  // namespace

// Batch norm in training, forward and backward.
namespace {

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
void bind_batch_norm_for(py::module_& m, const char* forward_doc, const char* backward_doc) {
  m.def("cpu_batch_norm", &batch_norm<T>, py::arg("x").noconvert(), py::arg("weight").noconvert(),
        py::arg("bias").noconvert(), py::arg("eps"), forward_doc);
  m.def("cpu_batch_norm_backward", &batch_norm_backward<T>, py::arg("g").noconvert(), py::arg("x").noconvert(),
        py::arg("weight").noconvert(), py::arg("mean").noconvert(), py::arg("rstd").noconvert(), backward_doc);
}

// the p-norm (finite p >= 0) of the difference of rows a and b of m elements, in T as PyTorch's kernel
// computes it (a square past T's range is inf there too)
template <typename T>
T pair_distance(const T* a, const T* b, Index m, T p) {
  T total = 0;
  if (p == T(2)) {
    for (Index k = 0; k < m; ++k) {
      const T d = a[k] - b[k];
      total += d * d;
    }
    return std::sqrt(total);
  }
  if (p == T(1)) {
    for (Index k = 0; k < m; ++k) total += std::fabs(a[k] - b[k]);
    return total;
  }
  if (p == T(0)) {
    // PyTorch's count: min(ceil(|d|), 1) per element, so that a NaN difference (inf - inf too) gives NaN
    for (Index k = 0; k < m; ++k) total += std::min(std::ceil(std::fabs(a[k] - b[k])), T(1));
    return total;
  }
  for (Index k = 0; k < m; ++k) total += std::pow(std::fabs(a[k] - b[k]), p);
  return std::pow(total, T(1) / p);
}

template <typename T>
py::array_t<T> pdist(const Array<T>& x, double p) {
  if (x.ndim() != 2) throw std::invalid_argument("cpu_pdist: expected a matrix");
  if (!(p >= 0.0) || std::isinf(p)) throw std::invalid_argument("cpu_pdist: p must be finite and non-negative");
  const Index n = x.shape(0), m = x.shape(1);
  py::array_t<T> out(std::vector<py::ssize_t>{n > 1 ? n * (n - 1) / 2 : 0});
  const T* in = x.data();
  T* d = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index i = 0; i < n; ++i)
      for (Index j = i + 1; j < n; ++j) *d++ = pair_distance(in + i * m, in + j * m, m, static_cast<T>(p));
  }
  return out;
}

// the cross products of the 3-vectors along the middle dim of a and b viewed as (outer, 3, inner), each
// component a[i] * b[j] - a[j] * b[i] rounded as those two products and their difference (NumPy's order)
template <typename T>
py::array_t<T> cross(const Array<T>& a, const Array<T>& b, Index outer, Index inner) {
  if (a.size() != b.size() || a.size() != outer * 3 * inner)
    throw std::invalid_argument("cpu_cross: the arrays do not fit (outer, 3, inner)");
  py::array_t<T> out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  const T* x = a.data();
  const T* y = b.data();
  T* c = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index o = 0; o < outer; ++o) {
      const Index base = o * 3 * inner;
      for (Index k = 0; k < inner; ++k) {
        const T* u = x + base + k;
        const T* v = y + base + k;
        T* w = c + base + k;
        const T u0 = u[0], u1 = u[inner], u2 = u[2 * inner], v0 = v[0], v1 = v[inner], v2 = v[2 * inner];
        w[0] = u1 * v2 - u2 * v1;
        w[inner] = u2 * v0 - u0 * v2;
        w[2 * inner] = u0 * v1 - u1 * v0;
      }
    }
  }
  return out;
}

// the distances of each row of x1 (batches, P, M) to each row of x2 (batches, R, M): (batches, P, R)
template <typename T>
py::array_t<T> cdist(const Array<T>& x1, const Array<T>& x2, double p) {
  if (x1.ndim() != 3 || x2.ndim() != 3 || x1.shape(0) != x2.shape(0) || x1.shape(2) != x2.shape(2))
    throw std::invalid_argument("cpu_cdist: expected (B, P, M) and (B, R, M)");
  if (!(p >= 0.0) || std::isinf(p)) throw std::invalid_argument("cpu_cdist: p must be finite and non-negative");
  const Index batches = x1.shape(0), rows1 = x1.shape(1), rows2 = x2.shape(1), m = x1.shape(2);
  py::array_t<T> out(std::vector<py::ssize_t>{batches, rows1, rows2});
  const T* a = x1.data();
  const T* b = x2.data();
  T* d = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (Index n = 0; n < batches; ++n)
      for (Index i = 0; i < rows1; ++i)
        for (Index j = 0; j < rows2; ++j)
          *d++ = pair_distance(a + (n * rows1 + i) * m, b + (n * rows2 + j) * m, m, static_cast<T>(p));
  }
  return out;
}

}  // namespace


void bind_norm(py::module_& m) {
  m.def("cpu_cdist", &cdist<float>, py::arg("x1").noconvert(), py::arg("x2").noconvert(), py::arg("p"));
  m.def("cpu_cdist", &cdist<double>, py::arg("x1").noconvert(), py::arg("x2").noconvert(), py::arg("p"),
        "The p-norms (finite p >= 0) of the differences of each row of x1 (B, P, M) and each row of x2 "
        "(B, R, M), C-contiguous float32/float64 of one dtype: (B, P, R) in their dtype.");
  m.def("cpu_cross", &cross<float>, py::arg("a").noconvert(), py::arg("b").noconvert(), py::arg("outer"),
        py::arg("inner"));
  m.def("cpu_cross", &cross<double>, py::arg("a").noconvert(), py::arg("b").noconvert(), py::arg("outer"),
        py::arg("inner"),
        "The cross products of the 3-vectors along the middle dim of C-contiguous float32/float64 arrays a and "
        "b of one shape, viewed as (outer, 3, inner), in an array of their shape.");
  m.def("cpu_pdist", &pdist<float>, py::arg("x").noconvert(), py::arg("p"));
  m.def("cpu_pdist", &pdist<double>, py::arg("x").noconvert(), py::arg("p"),
        "The p-norms (finite p >= 0) of the differences of the rows i < j of a C-contiguous float32/float64 "
        "matrix, in row-major order of the pairs, in its dtype.");
  bind_for<float>(m, "");
  bind_for<double>(
      m,
      "(y, mean (rows,), rstd (rows,)) of a C-contiguous float32/float64 array as ``rows`` equal rows, each "
      "normalised, then times weight and plus bias (optional, the array's dtype): element k of row r takes "
      "parameter (r % groups) * (row length / spread) + k // spread (layer norm: groups = spread = 1; group "
      "norm: groups G, spread the spatial size).");
  bind_layer_norm_for<float>(m, "", "");
  bind_layer_norm_for<double>(
      m,
      "(y, mean (rows,), rstd (rows,)) of layer norm over a C-contiguous float32/float64 array as ``rows`` "
      "equal rows, times weight plus bias (optional, one per row element, x's dtype); ``xhat`` (optional, "
      "x's size and dtype) receives (x - mean) * rstd. ``avx2``: the AVX2 build of the loops (True, only where "
      "host_has_avx2()) or the baseline one (False); None: AVX2 where the CPU has it. Both give the same numbers.",
      "(dx, dweight or None without a weight, dbias) of cpu_layer_norm, given the upstream gradient g, x, "
      "the weight, the row statistics and optionally the xhat the forward kept (all C-contiguous, x's dtype); "
      "``avx2``: as cpu_layer_norm's.");
  bind_batch_norm_for<float>(m, "", "");
  bind_batch_norm_for<double>(m,
                   "(y, mean (C,), rstd (C,)) of a C-contiguous float32/float64 x (N, C, *) normalised per channel "
                   "with its batch statistics, times weight plus bias (optional, (C,), x's dtype).",
                   "(dx, dweight (None without a weight), dbias) of batch norm at x with its mean and rstd, all "
                   "C-contiguous, of x's dtype.");
}

}  // namespace adcuda::host
