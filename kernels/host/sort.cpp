// The CPU backend's stable sort of small rows (adcuda/backends/cpu/sort.py's sort, below), and its
// running maximum and minimum with their indices (running_extreme, the forward of cummax and cummin)
// along the last dim of a C-contiguous array, in one pass. NumPy takes seven whole-array calls for the same (a scan, two comparisons, a where over the
// positions, a second scan, a gather), each costing more than this loop on a small array. PyTorch's
// rule: an element at least as large (as small) as the running value takes its place and index, so a
// later equal value wins (its zero's sign too), and a NaN propagates with the index of the last NaN.
// The NumPy path there is the reference (tests/test_cpu_fast_paths.py compares them). Built in every
// install, with or without CUDA; the GIL is held (meant for the small arrays where calls dominate).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "host/bind_types.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// (values, int64 indices), both of x's shape, written row by row (a row: the last dim) by
// ``row(in, out, at, n)``.
template <typename T, typename Row>
py::tuple each_row(const py::array_t<T, py::array::c_style>& x, Row row) {
  std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
  py::array_t<T> values(shape);
  py::array_t<Index> indices(shape);
  const Index n = x.ndim() ? static_cast<Index>(x.shape(x.ndim() - 1)) : 1;
  const Index rows = n ? static_cast<Index>(x.size()) / n : 0;
  const T* in = x.data();
  T* out = values.mutable_data();
  Index* at = indices.mutable_data();
  for (Index r = 0; r < rows; ++r, in += n, out += n, at += n) row(in, out, at, n);
  return py::make_tuple(values, indices);
}

template <typename T, bool Largest>
py::tuple running_extreme_rows(const py::array_t<T, py::array::c_style>& x) {
  return each_row(x, [](const T* in, T* out, Index* at, Index n) {
    T running = in[0];
    Index where = 0;
    for (Index i = 0; i < n; ++i) {
      const T v = in[i];
      // v != v: a NaN (never so for an integer type)
      if (v != v || (Largest ? v >= running : v <= running)) {
        running = v;
        where = i;
      }
      out[i] = running;
      at[i] = where;
    }
  });
}

// A new array of x's shape holding the inclusive scan of each row (the last dim) of a C-contiguous array
// by `combine(running, next)`, in the array's type and in order, as NumPy's ufunc accumulate (the reference
// of each use below) computes it, without its iterator's cost for each row of a small array.
template <typename T, typename Combine>
py::array_t<T> scanned_rows(const py::array_t<T, py::array::c_style>& x, Combine combine) {
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const Index n = x.ndim() ? static_cast<Index>(x.shape(x.ndim() - 1)) : 1;
  const Index rows = n ? static_cast<Index>(x.size()) / n : 0;
  const T* in = x.data();
  T* result = out.mutable_data();
  for (Index r = 0; r < rows; ++r, in += n, result += n) {
    T running = in[0];
    result[0] = running;
    for (Index i = 1; i < n; ++i) result[i] = running = combine(running, in[i]);
  }
  return out;
}

// The running sum (product if `multiply`) of rows: NumPy's add/multiply.accumulate, the CPU backend's cumsum
// and cumprod.
template <typename T>
py::array_t<T> host_accumulate_rows(bool multiply, const py::array_t<T, py::array::c_style>& x) {
  if (multiply) return scanned_rows(x, [](T a, T b) { return a * b; });
  return scanned_rows(x, [](T a, T b) { return a + b; });
}

// NumPy's logaddexp of two values of one float type (npy_logaddexp's formula, in the type): equal values
// (infinities among them) give a + log(2); else the larger plus log1p(exp(-difference)); NaN propagates.
template <typename T>
T logaddexp(T a, T b) {
  if (a == b) return a + T(0.693147180559945309417232121458176568);
  const T difference = a - b;
  if (difference > 0) return a + std::log1p(std::exp(-difference));
  if (difference <= 0) return b + std::log1p(std::exp(difference));
  return difference;  // a NaN
}

// The running log(sum(exp)) of rows (logcumsumexp's forward, the CPU backend's scan("logaddexp")): NumPy's
// logaddexp.accumulate.
template <typename T>
py::array_t<T> host_logcumsumexp_rows(const py::array_t<T, py::array::c_style>& x) {
  return scanned_rows(x, logaddexp<T>);
}

template <typename T>
py::tuple host_running_extreme(bool largest, const py::array_t<T, py::array::c_style>& x) {
  return largest ? running_extreme_rows<T, true>(x) : running_extreme_rows<T, false>(x);
}

// Sorts the indices [first, first + n) stably by `less`: an insertion sort for a short row (no buffer to
// allocate, as std::stable_sort does on each call: most of a small row's cost), std::stable_sort otherwise.
template <typename Less>
void stable_order(Index* first, Index n, Less less) {
  if (n > 32) {
    std::stable_sort(first, first + n, less);
    return;
  }
  for (Index i = 1; i < n; ++i) {
    const Index key = first[i];
    Index j = i;
    for (; j > 0 && less(key, first[j - 1]); --j) first[j] = first[j - 1];
    first[j] = key;
  }
}

// A stable sort of each row (the last dim) of a C-contiguous array: the int64 order and the values in it
// (each element moved as it is: a zero's sign, a NaN's payload). NaN sorts as the largest value, and
// equal values (NaNs among them) keep their order, as NumPy's stable sort (the CPU backend's sort, which
// stays the reference and serves large arrays) and PyTorch's stable sort do.
template <typename T, bool Descending>
struct Before {
  const T* in;
  // v != v: a NaN (never so for an integer type), larger than every number
  bool operator()(Index i, Index j) const {
    const T a = in[i], b = in[j];
    return Descending ? (a > b || (a != a && b == b)) : (a < b || (b != b && a == a));
  }
};

template <typename T, bool Descending>
py::tuple sorted_rows(const py::array_t<T, py::array::c_style>& x) {
  return each_row(x, [](const T* in, T* out, Index* at, Index n) {
    for (Index i = 0; i < n; ++i) at[i] = i;
    stable_order(at, n, Before<T, Descending>{in});
    for (Index i = 0; i < n; ++i) out[i] = in[at[i]];
  });
}

// The first k of each row's stable sort (sorted_rows's order), as new C-contiguous (values, int64 indices)
// of shape x.shape[:-1] + (k,): topk's and kthvalue's, without the rest of the sorted rows to slice off.
template <typename T, bool Descending>
py::tuple first_sorted_rows(const py::array_t<T, py::array::c_style>& x, Index k) {
  const Index n = x.ndim() ? static_cast<Index>(x.shape(x.ndim() - 1)) : 0;
  if (x.ndim() == 0 || k < 0 || k > n)
    throw std::invalid_argument("host_first_sorted: k must be in [0, the last dim's size] of an array of >= 1 dim");
  std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
  shape.back() = static_cast<py::ssize_t>(k);
  py::array_t<T> values(shape);
  py::array_t<Index> indices(shape);
  const Index rows = n ? static_cast<Index>(x.size()) / n : 0;
  std::vector<Index> order(static_cast<std::size_t>(n));
  const T* in = x.data();
  T* out = values.mutable_data();
  Index* at = indices.mutable_data();
  for (Index r = 0; r < rows; ++r, in += n, out += k, at += k) {
    for (Index i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    stable_order(order.data(), n, Before<T, Descending>{in});
    for (Index i = 0; i < k; ++i) {
      at[i] = order[static_cast<std::size_t>(i)];
      out[i] = in[at[i]];
    }
  }
  return py::make_tuple(values, indices);
}

template <typename T>
py::tuple host_first_sorted(bool descending, const py::array_t<T, py::array::c_style>& x, Index k) {
  return descending ? first_sorted_rows<T, true>(x, k) : first_sorted_rows<T, false>(x, k);
}

template <typename T>
py::tuple host_sort_rows(bool descending, const py::array_t<T, py::array::c_style>& x) {
  return descending ? sorted_rows<T, true>(x) : sorted_rows<T, false>(x);
}

// The mode of each row (the last dim) of a C-contiguous array: the most frequent value (the smallest of
// equally frequent ones) and the index of its last occurrence, as (values, int64 indices) of shape x.shape[:-1].
// The row is stably sorted (as sorted_rows: NaN last, and each NaN its own value, equal to nothing), so the
// end of the first longest run of equal values is the answer, and the stable order makes its index the last
// occurrence in the row: PyTorch's mode, and the NumPy composition in adcuda/ops/sort.py's mode, its reference.
template <typename T>
py::tuple host_mode_rows(const py::array_t<T, py::array::c_style>& x) {
  if (x.ndim() == 0 || x.shape(x.ndim() - 1) == 0)
    throw std::invalid_argument("host_mode_rows: rows of at least one element expected");
  std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim() - 1);
  py::array_t<T> values(shape);
  py::array_t<Index> indices(shape);
  const Index n = static_cast<Index>(x.shape(x.ndim() - 1));
  const Index rows = static_cast<Index>(x.size()) / n;
  std::vector<Index> order(static_cast<std::size_t>(n));
  const T* in = x.data();
  T* out = values.mutable_data();
  Index* at = indices.mutable_data();
  for (Index r = 0; r < rows; ++r, in += n) {
    Index* first = order.data();
    for (Index i = 0; i < n; ++i) first[i] = i;
    stable_order(first, n, Before<T, false>{in});
    Index best = 0, best_length = 0, start = 0;
    for (Index i = 1; i <= n; ++i) {
      if (i < n && in[first[i]] == in[first[i - 1]]) continue;
      if (i - start > best_length) {  // (strictly longer: the first, smallest, of equally long runs)
        best_length = i - start;
        best = i - 1;
      }
      start = i;
    }
    out[r] = in[first[best]];
    at[r] = first[best];
  }
  return py::make_tuple(values, indices);
}

// median() (nanmedian() if skip_nan) of every element of a non-empty C-contiguous array, as a 0-d array of
// its dtype: the lower middle of its numbers (nth_element on a copy: no full sort for one order statistic),
// or a NaN where the array holds one (median) or nothing else (nanmedian). The value of ops/sort.py's
// composition over the sort, its reference.
template <typename T>
py::array_t<T> host_median_all(bool skip_nan, const py::array_t<T, py::array::c_style>& x) {
  const Index n = static_cast<Index>(x.size());
  if (n == 0) throw std::invalid_argument("host_median_all: an empty array has no median");
  const T* in = x.data();
  std::vector<T> numbers;
  numbers.reserve(static_cast<std::size_t>(n));
  T nan = T(0);
  for (Index i = 0; i < n; ++i) {
    if (in[i] == in[i])
      numbers.push_back(in[i]);
    else
      nan = in[i];  // (never so for an integer type)
  }
  py::array_t<T> out(std::vector<py::ssize_t>{});
  if (numbers.empty() || (!skip_nan && static_cast<Index>(numbers.size()) < n)) {
    *out.mutable_data() = nan;
    return out;
  }
  const auto middle = numbers.begin() + static_cast<std::ptrdiff_t>((numbers.size() - 1) / 2);
  std::nth_element(numbers.begin(), middle, numbers.end());
  *out.mutable_data() = *middle;
  return out;
}

}  // namespace

void bind_sort(py::module_& m) {
  m.def("host_sort_rows", &host_sort_rows<float>, py::arg("descending"), py::arg("x").noconvert());
  m.def("host_sort_rows", &host_sort_rows<double>, py::arg("descending"), py::arg("x").noconvert());
  m.def("host_sort_rows", &host_sort_rows<std::int64_t>, py::arg("descending"), py::arg("x").noconvert());
  m.def("host_sort_rows", &host_sort_rows<std::int32_t>, py::arg("descending"), py::arg("x").noconvert(),
        "(values, int64 indices) of a stable sort of each row (the last dim) of a C-contiguous "
        "float32/float64/int64/int32 array, ascending or descending; NaN sorts as the largest value and equal "
        "values keep their order.");
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_accumulate_rows", &host_accumulate_rows<T>, py::arg("multiply"), py::arg("x").noconvert(),
          "The running sum (product if multiply) along the last dim of a C-contiguous float32/float64 array, "
          "in order (NumPy's accumulate), a new array of its shape.");
  });
  for_types<float, double>([&m](auto type) {
    using T = decltype(type);
    m.def("host_logcumsumexp_rows", &host_logcumsumexp_rows<T>, py::arg("x").noconvert(),
          "The running log(sum(exp)) along the last dim of a C-contiguous float32/float64 array (NumPy's "
          "logaddexp.accumulate), a new array of its shape.");
  });
  for_types<float, double, std::int64_t, std::int32_t>([&m](auto type) {
    using T = decltype(type);
    m.def("host_first_sorted", &host_first_sorted<T>, py::arg("descending"), py::arg("x").noconvert(), py::arg("k"),
          "(values, int64 indices) of shape x.shape[:-1] + (k,): the first k of host_sort_rows's stable sort "
          "of each row (the last dim) of a C-contiguous float32/float64/int64/int32 array of >= 1 dim.");
  });
  for_types<float, double, std::int64_t, std::int32_t>([&m](auto type) {
    using T = decltype(type);
    m.def("host_median_all", &host_median_all<T>, py::arg("skip_nan"), py::arg("x").noconvert(),
          "The lower median of every element of a non-empty C-contiguous float32/float64/int64/int32 array "
          "(NaN left out if skip_nan), a 0-d array of its dtype; NaN where it holds one (only NaN, if skip_nan).");
  });
  for_types<float, double, std::int64_t, std::int32_t>([&m](auto type) {
    using T = decltype(type);
    m.def("host_mode_rows", &host_mode_rows<T>, py::arg("x").noconvert(),
          "(values, int64 indices) of shape x.shape[:-1]: the mode of each row (the last dim) of a C-contiguous "
          "float32/float64/int64/int32 array, the smallest of equally frequent values, at its last occurrence.");
  });
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  m.def("host_running_extreme", &host_running_extreme<float>, py::arg("largest"), py::arg("x").noconvert());
  m.def("host_running_extreme", &host_running_extreme<double>, py::arg("largest"), py::arg("x").noconvert());
  m.def("host_running_extreme", &host_running_extreme<std::int64_t>, py::arg("largest"), py::arg("x").noconvert());
  m.def("host_running_extreme", &host_running_extreme<std::int32_t>, py::arg("largest"), py::arg("x").noconvert());
  m.def("host_running_extreme", &host_running_extreme<bool>, py::arg("largest"), py::arg("x").noconvert(),
        "(running maximum (largest) or minimum, int64 index of each) along the last dim of a C-contiguous "
        "float32/float64/int64/int32/bool array: PyTorch's cummax/cummin (a later equal value wins; NaN propagates "
        "with the last NaN's index).");
}

}  // namespace adcuda::host
