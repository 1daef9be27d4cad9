// The CPU backend's layer norm, group norm and batch norm forwards (adcuda/backends/cpu/norm.py) over small
// C-contiguous float32/float64 arrays: each row's mean and variance (two passes, accumulated in double),
// then the normalised row times its weight plus its bias, in the array's dtype. NumPy takes a dozen
// calls of a microsecond or more for that on the small arrays of a per-op call (np.mean alone adds a
// Python layer of several); here it is one. The NumPy path stays the reference
// (tests/test_norm_host.py compares the two) and serves large arrays, where its BLAS row sums are
// faster. Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
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

// Batch norm: channel c of x (N, C, S...) is the N runs of S elements at n * C * S + c * S, normalised
// with their mean and (biased) variance, two passes accumulated in double, as the rows above.
template <typename T>
py::tuple batch_norm(const Array<T>& x, const std::optional<Array<T>>& weight, const std::optional<Array<T>>& bias,
                     double eps) {
  if (x.ndim() < 2) throw std::invalid_argument("cpu_batch_norm: expected x of 2 dims or more");
  const Index n = x.shape(0), c = x.shape(1), s = c ? x.size() / (n * c ? n * c : 1) : 0;
  if ((weight && weight->size() != c) || (bias && bias->size() != c))
    throw std::invalid_argument("cpu_batch_norm: weight and bias must have one value per channel");
  py::array_t<T> y(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array_t<T> means(std::vector<py::ssize_t>{c}), rstds(std::vector<py::ssize_t>{c});
  const T* in = x.data();
  const T* w = weight ? weight->data() : nullptr;
  const T* b = bias ? bias->data() : nullptr;
  T* out = y.mutable_data();
  T* mean_out = means.mutable_data();
  T* rstd_out = rstds.mutable_data();
  {
    py::gil_scoped_release release;
    const double count = double(n * s);
    for (Index ch = 0; ch < c; ++ch) {
      double sum = 0.0;
      for (Index i = 0; i < n; ++i) {
        const T* run = in + (i * c + ch) * s;
        for (Index k = 0; k < s; ++k) sum += double(run[k]);
      }
      const double mean = sum / count;
      double squares = 0.0;
      for (Index i = 0; i < n; ++i) {
        const T* run = in + (i * c + ch) * s;
        for (Index k = 0; k < s; ++k) {
          const double d = double(run[k]) - mean;
          squares += d * d;
        }
      }
      const T m = T(mean), rstd = T(1.0 / std::sqrt(squares / count + eps));
      mean_out[ch] = m;
      rstd_out[ch] = rstd;
      const T scale = w != nullptr ? rstd * w[ch] : rstd;  // rstd folded into the weight, as the NumPy path
      for (Index i = 0; i < n; ++i) {
        const T* run = in + (i * c + ch) * s;
        T* o = out + (i * c + ch) * s;
        for (Index k = 0; k < s; ++k) {
          T v = (run[k] - m) * scale;
          if (b != nullptr) v += b[ch];
          o[k] = v;
        }
      }
    }
  }
  return py::make_tuple(y, means, rstds);
}

template <typename T>
void bind_for(py::module_& m, const char* doc, const char* batch_norm_doc) {
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
  m.def("cpu_batch_norm", &batch_norm<T>, py::arg("x").noconvert(), py::arg("weight").noconvert(),
        py::arg("bias").noconvert(), py::arg("eps"), batch_norm_doc);
}

}  // namespace

void bind_norm(py::module_& m) {
  bind_for<float>(m, "", "");
  bind_for<double>(
      m,
      "(y, mean (rows,), rstd (rows,)) of a C-contiguous float32/float64 array as ``rows`` equal rows, each "
      "normalised, then times weight and plus bias (optional, the array's dtype): element k of row r takes "
      "parameter (r % groups) * (row length / spread) + k // spread (layer norm: groups = spread = 1; group "
      "norm: groups G, spread the spatial size).",
      "(y, mean (C,), rstd (C,)) of a C-contiguous float32/float64 array x (N, C, *) with at least one value per "
      "channel, each channel normalised with its batch statistics, then times weight and plus bias (optional, (C,) "
      "of x's dtype).");
}

}  // namespace adcuda::host
