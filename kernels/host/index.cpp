// The CPU backend's gather and scatter along an axis (adcuda/backends/cpu/index.py's gather, scatter_add and
// scatter_reduce, the forwards of gather, take_along_dim, scatter_add and scatter_reduce) as one loop over
// the index. NumPy makes a grid of positions for the other dims and runs its advanced indexing or ufunc.at
// over the resulting key, several microseconds on a small array where this loop takes a fraction of one.
// out[..., index[p], ...] (the index's value along `axis`, p's own position along the others) combined
// with src[p]: written, added, multiplied, or the larger / smaller kept as np.maximum / np.minimum keep it
// (a NaN on either side wins). The NumPy path there is the reference (tests/test_cpu_fast_paths.py
// compares them). Built in every install, with or without CUDA; the GIL is held (meant for the small
// arrays where calls dominate).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

enum Combine { kWrite = 0, kAdd = 1, kMultiply = 2, kMaximum = 3, kMinimum = 4 };

template <typename T>
T combined(int how, T old, T v) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wrapping as NumPy's integers wrap, without signed overflow
    if (how == kAdd) return static_cast<T>(static_cast<U>(old) + static_cast<U>(v));
    if (how == kMultiply) return static_cast<T>(static_cast<U>(old) * static_cast<U>(v));
  } else {
    if (how == kAdd) return old + v;
    if (how == kMultiply) return old * v;
  }
  // NumPy's maximum and minimum: the first operand where it is NaN or strictly larger (smaller), else the
  // second (a NaN second operand, and the second of a tie: -0.0 against 0.0)
  if (how == kMaximum) return (old > v || old != old) ? old : v;
  if (how == kMinimum) return (old < v || old != old) ? old : v;
  return v;
}

// Visits every position of `index` (row-major), calling visit(offset into `a` with index's value along
// axis, the position's element offset in `other`); IndexError for a value outside [0, a.shape[axis]).
template <typename Visit>
void along_axis(const py::array& a, int axis, const py::array_t<Index>& index, const py::array& other, Visit visit) {
  const int ndim = static_cast<int>(index.ndim());
  if (a.ndim() != ndim || other.ndim() != ndim || axis < 0 || axis >= ndim) {
    throw py::value_error("along_axis: the arrays must have the index's number of dims");
  }
  const Index n = static_cast<Index>(a.shape(axis));
  std::vector<Index> count(ndim, 0);
  Index a_at = 0, index_at = 0, other_at = 0;  // offsets in elements of the position `count`
  const Index total = static_cast<Index>(index.size());
  const Index* values = index.data();
  const Index a_item = static_cast<Index>(a.itemsize()), other_item = static_cast<Index>(other.itemsize());
  for (Index k = 0; k < total; ++k) {
    const Index v = values[index_at];
    if (v < 0 || v >= n) {
      throw py::index_error("index " + std::to_string(v) + " is out of bounds for axis " + std::to_string(axis) +
                            " with size " + std::to_string(n));
    }
    visit(a_at + v * (static_cast<Index>(a.strides(axis)) / a_item), other_at);
    for (int d = ndim - 1; d >= 0; --d) {  // the next position, row-major
      const Index a_step = d == axis ? 0 : static_cast<Index>(a.strides(d)) / a_item;
      const Index index_step = static_cast<Index>(index.strides(d)) / static_cast<Index>(sizeof(Index));
      const Index other_step = static_cast<Index>(other.strides(d)) / other_item;
      if (++count[d] < index.shape(d)) {
        a_at += a_step;
        index_at += index_step;
        other_at += other_step;
        break;
      }
      a_at -= a_step * (count[d] - 1);
      index_at -= index_step * (count[d] - 1);
      other_at -= other_step * (count[d] - 1);
      count[d] = 0;
    }
  }
}

// out (written in place) combined with src along axis at index; src at least index's size in every dim
template <typename T>
void host_scatter_along(py::array_t<T> out, int axis, const py::array_t<Index>& index, const py::array_t<T>& src,
                        int how) {
  if (how < kWrite || how > kMinimum) throw py::value_error("host_scatter_along: unknown combine");
  for (py::ssize_t d = 0; d < index.ndim() && d < src.ndim(); ++d) {
    if (index.shape(d) > src.shape(d)) throw py::value_error("host_scatter_along: index larger than src");
  }
  T* target = out.mutable_data();
  const T* from = src.data();
  along_axis(out, axis, index, src, [&](Index at, Index from_at) { target[at] = combined(how, target[at], from[from_at]); });
}

// a new array of index's shape: a's elements along axis at index
template <typename T>
py::array_t<T> host_gather_along(const py::array_t<T>& a, int axis, const py::array_t<Index>& index) {
  std::vector<py::ssize_t> shape(index.shape(), index.shape() + index.ndim());
  py::array_t<T> out(shape);
  T* to = out.mutable_data();
  const T* from = a.data();
  along_axis(a, axis, index, out, [&](Index at, Index out_at) { to[out_at] = from[at]; });
  return out;
}

// whether every value of a (non-empty) integer index lies in [0, n): the ops' range check of an index on
// the CPU, one pass where NumPy's reduction costs a microsecond of calls
template <typename I>
bool host_all_below(const py::array_t<I>& index, Index n) {
  const py::ssize_t ndim = index.ndim();
  if (ndim > 1 && !(index.flags() & py::array::c_style)) {
    throw py::value_error("host_all_below: expected a contiguous or 1-d index");
  }
  const I* values = index.data();
  const Index step = ndim == 1 ? static_cast<Index>(index.strides(0)) / static_cast<Index>(sizeof(I)) : 1;
  const Index total = static_cast<Index>(index.size());
  for (Index k = 0; k < total; ++k) {
    const Index v = static_cast<Index>(values[k * step]);
    if (v < 0 || v >= n) return false;
  }
  return true;
}

// NumPy's pairwise sum of n elements `stride` apart (its reduction loop over a strided row: below 8 one
// by one, up to 128 in eight interleaved running sums added as a tree, longer rows halved at a multiple
// of 8), in the element type, as np.add.reduce rounds it
template <typename T>
T pairwise_sum(const T* a, Index n, Index stride) {
  if (n < 8) {
    T res = static_cast<T>(-0.0);
    for (Index i = 0; i < n; ++i) res += a[i * stride];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j * stride];
    Index i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * stride];
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i * stride];
    return res;
  }
  Index half = n / 2;
  half -= half % 8;
  return pairwise_sum(a, half, stride) + pairwise_sum(a + half * stride, n - half, stride);
}

// the sum of a row-major matrix's main diagonal as the CPU backend's sum primitive computes it over the
// diagonal's strided view (np.add.reduce: its identity 0 plus the pairwise sum), as a 0-d array:
// trace's fast lane (adcuda/backends/cpu/index.py), without the view and the reduction's calls
template <typename T>
py::array_t<T> host_diagonal_sum(const py::array_t<T>& a) {
  if (a.ndim() != 2 || !(a.flags() & py::array::c_style)) {
    throw py::value_error("host_diagonal_sum: expected a row-major matrix");
  }
  const Index rows = static_cast<Index>(a.shape(0)), cols = static_cast<Index>(a.shape(1));
  py::array_t<T> out(std::vector<py::ssize_t>{});
  *out.mutable_data() = static_cast<T>(0) + pairwise_sum(a.data(), rows < cols ? rows : cols, cols + 1);
  return out;
}

// a copy of the row-major matrices (the last two dims) of `a` with the elements above (lower) or below
// (upper) the main diagonal zero: what np.where(mask, a, 0) makes of tril's and triu's masks, in one pass
template <typename T>
py::array_t<T> host_triangle(const py::array_t<T>& a, bool lower) {
  if (a.ndim() < 2 || !(a.flags() & py::array::c_style)) {
    throw py::value_error("host_triangle: expected row-major matrices");
  }
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  py::array_t<T> out(shape);
  const Index rows = static_cast<Index>(a.shape(a.ndim() - 2)), cols = static_cast<Index>(a.shape(a.ndim() - 1));
  const Index planes = rows * cols ? static_cast<Index>(a.size()) / (rows * cols) : 0;
  const T* from = a.data();
  T* to = out.mutable_data();
  for (Index p = 0; p < planes; ++p) {
    for (Index i = 0; i < rows; ++i) {
      for (Index j = 0; j < cols; ++j, ++from, ++to) *to = (lower ? j <= i : j >= i) ? *from : static_cast<T>(0);
    }
  }
  return out;
}

// (smallest, largest) of a non-empty integer index (contiguous or 1-d): one pass where NumPy's min and
// max cost two reductions' calls (one_hot's classes, the out-of-range value an error names)
template <typename I>
py::tuple host_bounds(const py::array_t<I>& index) {
  const py::ssize_t ndim = index.ndim();
  if ((ndim > 1 && !(index.flags() & py::array::c_style)) || index.size() == 0) {
    throw py::value_error("host_bounds: expected a non-empty contiguous or 1-d index");
  }
  const I* values = index.data();
  const Index step = ndim == 1 ? static_cast<Index>(index.strides(0)) / static_cast<Index>(sizeof(I)) : 1;
  const Index total = static_cast<Index>(index.size());
  Index lo = static_cast<Index>(values[0]), hi = lo;
  for (Index k = 1; k < total; ++k) {
    const Index v = static_cast<Index>(values[k * step]);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  return py::make_tuple(lo, hi);
}

template <typename T>
void bind_for(py::module_& m) {
  m.def("host_scatter_along", &host_scatter_along<T>, py::arg("out").noconvert(), py::arg("axis"),
        py::arg("index").noconvert(), py::arg("src").noconvert(), py::arg("how"));
  m.def("host_gather_along", &host_gather_along<T>, py::arg("a").noconvert(), py::arg("axis"),
        py::arg("index").noconvert());
}

}  // namespace

void bind_index(py::module_& m) {
  // no array_t conversion (noconvert): another dtype is the caller's to handle (NumPy's path)
  bind_for<float>(m);
  bind_for<double>(m);
  bind_for<std::int64_t>(m);
  bind_for<std::int32_t>(m);
  m.def("host_diagonal_sum", &host_diagonal_sum<float>, py::arg("a").noconvert());
  m.def("host_diagonal_sum", &host_diagonal_sum<double>, py::arg("a").noconvert(),
        "A row-major float32/float64 matrix's main diagonal summed as np.add.reduce sums it, as a 0-d array.");
  m.def("host_triangle", &host_triangle<float>, py::arg("a").noconvert(), py::arg("lower"));
  m.def("host_triangle", &host_triangle<double>, py::arg("a").noconvert(), py::arg("lower"),
        "A copy of row-major float32/float64 matrices with the other triangle (diagonal 0) zero.");
  m.def("host_bounds", &host_bounds<std::int64_t>, py::arg("index").noconvert());
  m.def("host_bounds", &host_bounds<std::int32_t>, py::arg("index").noconvert(),
        "(smallest, largest) of a non-empty int64/int32 index (contiguous or 1-d), as ints.");
  m.def("host_all_below", &host_all_below<std::int64_t>, py::arg("index").noconvert(), py::arg("n"));
  m.def("host_all_below", &host_all_below<std::int32_t>, py::arg("index").noconvert(), py::arg("n"),
        "Whether every value of an int64/int32 index (contiguous or 1-d) lies in [0, n).");
}

}  // namespace adcuda::host
