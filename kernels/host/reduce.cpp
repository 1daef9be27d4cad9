// Also the CPU backend's whole-array extremes and truth tests of small C-contiguous arrays (reduce.py's
// `reduce` over every dim: amax, amin, any, all, and aminmax's pair in one pass) and renorm's factor per
// slice: one call where NumPy's ufunc reductions cost a microsecond each on a small array.
//
// The CPU backend's variance (adcuda/backends/cpu/reduce.py's var, the forward of var, std, var_mean and
// std_mean) of the rows of a small C-contiguous float32/float64 array: each row's mean, then its sum of
// squared deviations from it (two passes, accumulated in double) over (count - correction). NumPy takes
// eight calls of a microsecond or so for that on the small arrays of a per-op call; here it is one. The
// NumPy path stays the reference (tests/test_cpu_fast_paths.py compares the two) and serves large arrays
// and reductions over other dims. Built in every install, with or without CUDA; the GIL is held (meant
// for the small arrays where calls dominate).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "host/bind_types.h"
#include "host/torch_order_sum.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// (rows,): `reduce(row, count)` of each of `rows` equal rows (`count` elements each) of a non-empty
// C-contiguous array, in its dtype; `name` is the caller's, for the refusal of a `rows` that does not divide it.
template <typename T, typename Reduce>
py::array_t<T> reduced_rows(const char* name, const py::array_t<T, py::array::c_style>& x, Index rows,
                            Reduce reduce) {
  const Index size = static_cast<Index>(x.size());
  if (rows <= 0 || size == 0 || size % rows)
    throw std::invalid_argument(std::string(name) + ": rows must be positive and divide a non-empty array");
  const Index count = size / rows;
  py::array_t<T> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows)});
  const T* in = x.data();
  T* result = out.mutable_data();
  for (Index r = 0; r < rows; ++r, in += count) result[r] = T(reduce(in, count));
  return out;
}

template <typename T>
py::array_t<T> host_row_variance(const py::array_t<T, py::array::c_style>& x, Index rows, double correction) {
  const Index count = rows > 0 ? static_cast<Index>(x.size()) / rows : 0;
  // a division by zero gives inf (or NaN for 0 / 0), as NumPy's quotient does
  const double dof = std::max(double(count) - correction, 0.0);
  return reduced_rows("host_row_variance", x, rows, [dof](const T* in, Index n) {
    double sum = 0.0;
    for (Index k = 0; k < n; ++k) sum += double(in[k]);
    const double mean = sum / double(n);
    double squares = 0.0;
    for (Index k = 0; k < n; ++k) {
      const double d = double(in[k]) - mean;
      squares += d * d;
    }
    return squares / dof;
  });
}

// log(sum(exp(row))) of each of `rows` equal rows of a non-empty C-contiguous float32/float64 array, in
// double: the row's maximum taken out first (0 where it is not finite, as the CPU backend's NumPy path,
// the reference: an inf row gives inf, a row of -inf gives -inf, a NaN gives NaN), in the array's dtype.
template <typename T>
py::array_t<T> host_row_logsumexp(const py::array_t<T, py::array::c_style>& x, Index rows) {
  return reduced_rows("host_row_logsumexp", x, rows, [](const T* in, Index n) {
    double largest = double(in[0]);
    for (Index k = 1; k < n && largest == largest; ++k) {
      const double v = double(in[k]);
      largest = (v > largest || v != v) ? v : largest;
    }
    const double shift = std::isfinite(largest) ? largest : 0.0;
    double total = 0.0;
    for (Index k = 0; k < n; ++k) total += std::exp(double(in[k]) - shift);
    return std::log(total) + shift;
  });
}

// A 0-d array holding `value`.
template <typename T>
py::array_t<T> scalar(T value) {
  py::array_t<T> out(std::vector<py::ssize_t>{});
  *out.mutable_data() = value;
  return out;
}

// The 2-norm of every element of a non-empty C-contiguous float32/float64 array, a 0-d array of its dtype:
// the squares (rounded in the dtype), their sum in PyTorch's order, its root in the dtype; the values of
// ops/reduce.py's p = 2 norm over the primitives (a product, the sum, a root), its reference.
template <typename T>
py::array_t<T> host_norm2_all(const py::array_t<T, py::array::c_style>& x) {
  const std::size_t n = static_cast<std::size_t>(x.size());
  if (n == 0) throw std::invalid_argument("host_norm2_all: an empty array");
  std::vector<T> squares(n);
  const T* in = x.data();
  for (std::size_t i = 0; i < n; ++i) squares[i] = in[i] * in[i];
  return scalar<T>(std::sqrt(torch_order_sum(squares.data(), n)));
}

// nansum() (nanmean() if `mean`) of every element of a non-empty C-contiguous float32/float64 array, a 0-d
// array of its dtype: the elements with NaN as 0 summed in PyTorch's order, divided (mean) by the count of
// the others in the dtype (0 / 0: NaN for an array of NaN only); the values of ops/reduce.py's
// composition over the primitives (a where, the sum, a count, a division), its reference.
template <typename T>
py::array_t<T> host_nansum_all(const py::array_t<T, py::array::c_style>& x, bool mean) {
  const std::size_t n = static_cast<std::size_t>(x.size());
  if (n == 0) throw std::invalid_argument("host_nansum_all: an empty array");
  std::vector<T> numbers(n);
  const T* in = x.data();
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool number = in[i] == in[i];
    numbers[i] = number ? in[i] : T(0);
    count += number;
  }
  const T total = torch_order_sum(numbers.data(), n);
  return scalar<T>(mean ? total / T(count) : total);
}

// (var or std, mean) of every element of a non-empty C-contiguous float32/float64 array, 0-d arrays of its
// dtype, for var_mean and std_mean over every dim: the variance as host_row_variance's of one row (its root,
// in the dtype, for std: the root of the rounded variance, as the backend's sqrt of var's result), the mean
// as the CPU backend's mean over every dim (the sum in PyTorch's order, then one division in the dtype).
template <typename T>
py::tuple host_var_mean_all(const py::array_t<T, py::array::c_style>& x, double correction, bool root) {
  const auto spread = host_row_variance<T>(x, 1, correction);
  const T var = *spread.data();
  const T mean = torch_order_sum(x.data(), static_cast<std::size_t>(x.size())) / T(x.size());
  return py::make_tuple(scalar<T>(root ? std::sqrt(var) : var), scalar<T>(mean));
}

// (min, max) of every element of a non-empty C-contiguous array, as 0-d arrays of its dtype, by NumPy's
// minimum and maximum applied in order (acc < v || acc != acc ? acc : v): a NaN anywhere is both results,
// as NumPy's and PyTorch's amin and amax propagate it.
template <typename T>
py::tuple host_extremes_all(const py::array_t<T, py::array::c_style>& x) {
  const Index n = static_cast<Index>(x.size());
  if (n == 0) throw std::invalid_argument("host_extremes_all: an empty array has no extremes");
  const T* in = x.data();
  T low = in[0], high = in[0];
  for (Index i = 1; i < n && low == low; ++i) {  // (low != low: a NaN met, the result)
    const T v = in[i];
    if (v != v) {
      low = high = v;
      break;
    }
    low = low < v ? low : v;
    high = high >= v ? high : v;
  }
  return py::make_tuple(scalar(low), scalar(high));
}

// Whether any (`any`) or every element of a C-contiguous array is nonzero (a NaN is), as a 0-d bool array.
template <typename T>
py::array_t<bool> host_truth_all(bool any, const py::array_t<T, py::array::c_style>& x) {
  const Index n = static_cast<Index>(x.size());
  const T* in = x.data();
  for (Index i = 0; i < n; ++i)
    if ((in[i] != T(0)) == any) return scalar(any);
  return scalar(!any);
}

// renorm of a C-contiguous array seen as (outer, count, inner): each of the `count` slices (every element
// with one middle index) whose p-norm exceeds maxnorm, scaled by maxnorm / (norm + 1e-7) (PyTorch's factor,
// its reciprocal times maxnorm, in the array's dtype), the others kept; a new array of x's shape. The norm
// is accumulated in double: |v|^p summed, then its 1/p-th power (p = 1 and 2 without the powers; p = inf
// the largest magnitude); a NaN norm compares false and keeps its slice, as PyTorch's.
template <typename T>
py::array_t<T> host_renorm(const py::array_t<T, py::array::c_style>& x, Index outer, Index count, Index inner,
                           double p, double maxnorm) {
  if (outer < 0 || count < 0 || inner < 0 || outer * count * inner != static_cast<Index>(x.size()))
    throw std::invalid_argument("host_renorm: (outer, count, inner) must be the array's size");
  std::vector<double> norms(static_cast<std::size_t>(count), 0.0);
  const T* in = x.data();
  for (Index o = 0; o < outer; ++o)
    for (Index c = 0; c < count; ++c) {
      double& acc = norms[static_cast<std::size_t>(c)];
      for (Index k = 0; k < inner; ++k) {
        const double v = std::fabs(double(in[(o * count + c) * inner + k]));
        if (std::isinf(p))
          acc = (v > acc || v != v) ? v : acc;
        else
          acc += p == 2.0 ? v * v : (p == 1.0 ? v : std::pow(v, p));
      }
    }
  std::vector<T> factors(static_cast<std::size_t>(count));
  for (Index c = 0; c < count; ++c) {
    const double acc = norms[static_cast<std::size_t>(c)];
    const T norm = T(std::isinf(p) || p == 1.0 ? acc : (p == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / p)));
    factors[static_cast<std::size_t>(c)] = norm > T(maxnorm) ? T(1) / (norm + T(1e-7)) * T(maxnorm) : T(1);
  }
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  T* result = out.mutable_data();
  for (Index o = 0; o < outer; ++o)
    for (Index c = 0; c < count; ++c)
      for (Index k = 0; k < inner; ++k) {
        const Index at = (o * count + c) * inner + k;
        result[at] = in[at] * factors[static_cast<std::size_t>(c)];
      }
  return out;
}

}  // namespace

void bind_reduce(py::module_& m) {
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  m.def("host_row_variance", &host_row_variance<float>, py::arg("x").noconvert(), py::arg("rows"),
        py::arg("correction"));
  m.def("host_row_variance", &host_row_variance<double>, py::arg("x").noconvert(), py::arg("rows"),
        py::arg("correction"),
        "The variance (rows,) of each of ``rows`` equal rows of a non-empty C-contiguous float32/float64 array: "
        "the sum of squared deviations from the row's mean over max(row length - correction, 0), accumulated "
        "in double, in the array's dtype.");
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_var_mean_all", &host_var_mean_all<T>, py::arg("x").noconvert(), py::arg("correction"), py::arg("root"),
          "(variance, or its root if root, mean) of every element of a non-empty C-contiguous float32/float64 array, "
          "0-d arrays of its dtype: the variance accumulated in double, the mean in PyTorch's order of additions.");
  });
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_row_logsumexp", &host_row_logsumexp<T>, py::arg("x").noconvert(), py::arg("rows"),
          "log(sum(exp(row))) (rows,) of each of ``rows`` equal rows of a non-empty C-contiguous float32/float64 "
          "array, computed in double with the row's finite maximum taken out, in the array's dtype.");
  });
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_norm2_all", &host_norm2_all<T>, py::arg("x").noconvert(),
          "The 2-norm of every element of a non-empty C-contiguous float32/float64 array (the squares summed in "
          "PyTorch's order), a 0-d array of its dtype.");
  });
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_nansum_all", &host_nansum_all<T>, py::arg("x").noconvert(), py::arg("mean"),
          "The sum (mean if mean) of the elements of a non-empty C-contiguous float32/float64 array that are not "
          "NaN (summed in PyTorch's order, NaN as 0), a 0-d array of its dtype.");
  });
  for_types<float, double, std::int64_t, std::int32_t>([&m](auto type) {
    using T = decltype(type);
    m.def("host_extremes_all", &host_extremes_all<T>, py::arg("x").noconvert(),
          "(min, max) of every element of a non-empty C-contiguous float32/float64/int64/int32 array, 0-d "
          "arrays of its dtype; a NaN anywhere is both.");
  });
  for_types<bool, float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_truth_all", &host_truth_all<T>, py::arg("any"), py::arg("x").noconvert(),
          "Whether any (any=True) or every element of a C-contiguous bool/float32/float64 array is nonzero, "
          "as a 0-d bool array.");
  });
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_renorm", &host_renorm<T>, py::arg("x").noconvert(), py::arg("outer"), py::arg("count"), py::arg("inner"),
          py::arg("p"), py::arg("maxnorm"),
          "renorm of a C-contiguous float32/float64 array seen as (outer, count, inner) along its middle dim: "
          "each slice whose p-norm (accumulated in double) exceeds maxnorm scaled by maxnorm / (norm + 1e-7).");
  });
}

}  // namespace adcuda::host
