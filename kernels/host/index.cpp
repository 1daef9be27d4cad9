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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
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
// The shapes and strides are read once into plain arrays and the last dim is a loop of its own: pybind11's
// checked shape()/strides() accessors, called per element and dim, were most of a small call's time.
template <typename Visit>
void along_axis(const py::array& a, int axis, const py::array& index, const py::array& other, Visit visit) {
  const int ndim = static_cast<int>(index.ndim());
  if (a.ndim() != ndim || other.ndim() != ndim || axis < 0 || axis >= ndim) {
    throw py::value_error("along_axis: the arrays must have the index's number of dims");
  }
  for (int d = 0; d < ndim; ++d) {  // (else the walk below would leave a's memory)
    if (d != axis && index.shape()[d] > a.shape()[d]) {
      throw py::value_error("along_axis: the index is larger than the array in a dim other than the axis");
    }
  }
  if (index.size() == 0) return;
  const Index n = static_cast<Index>(a.shape()[axis]);
  const Index a_item = static_cast<Index>(a.itemsize()), other_item = static_cast<Index>(other.itemsize());
  const Index index_item = static_cast<Index>(sizeof(Index));
  // per dim: the index's extent and the steps (in elements) of a (none along axis), index and other
  std::vector<Index> extent(ndim), a_step(ndim), index_step(ndim), other_step(ndim), count(ndim, 0);
  for (int d = 0; d < ndim; ++d) {
    extent[d] = static_cast<Index>(index.shape()[d]);
    a_step[d] = d == axis ? 0 : static_cast<Index>(a.strides()[d]) / a_item;
    index_step[d] = static_cast<Index>(index.strides()[d]) / index_item;
    other_step[d] = static_cast<Index>(other.strides()[d]) / other_item;
  }
  const Index axis_step = static_cast<Index>(a.strides()[axis]) / a_item;
  const int last = ndim - 1;
  const Index inner = extent[last], a_last = a_step[last], index_last = index_step[last], other_last = other_step[last];
  const Index* values = static_cast<const Index*>(index.data());
  Index a_at = 0, index_at = 0, other_at = 0;  // offsets in elements of the row at `count` (its last dim 0)
  for (;;) {
    for (Index j = 0; j < inner; ++j) {
      const Index v = values[index_at + j * index_last];
      if (v < 0 || v >= n) {
        throw py::index_error("index " + std::to_string(v) + " is out of bounds for axis " + std::to_string(axis) +
                              " with size " + std::to_string(n));
      }
      visit(a_at + j * a_last + v * axis_step, other_at + j * other_last);
    }
    int d = last - 1;  // the next row, row-major
    for (; d >= 0; --d) {
      if (++count[d] < extent[d]) {
        a_at += a_step[d];
        index_at += index_step[d];
        other_at += other_step[d];
        break;
      }
      a_at -= a_step[d] * (count[d] - 1);
      index_at -= index_step[d] * (count[d] - 1);
      other_at -= other_step[d] * (count[d] - 1);
      count[d] = 0;
    }
    if (d < 0) return;
  }
}

// out (written in place) combined with src along axis at index; src at least index's size in every dim
template <typename T>
void scatter_along(const py::array& out, int axis, const py::array& index, const py::array& src, int how) {
  if (how < kWrite || how > kMinimum) throw py::value_error("host_scatter_along: unknown combine");
  for (py::ssize_t d = 0; d < index.ndim() && d < src.ndim(); ++d) {
    if (index.shape()[d] > src.shape()[d]) throw py::value_error("host_scatter_along: index larger than src");
  }
  T* target = static_cast<T*>(py::array(out).mutable_data());
  const T* from = static_cast<const T*>(src.data());
  along_axis(out, axis, index, src, [&](Index at, Index from_at) { target[at] = combined(how, target[at], from[from_at]); });
}

// a new array of index's shape: a's elements along axis at index
template <typename T>
py::array gather_along(const py::array& a, int axis, const py::array& index) {
  py::array_t<T> out(std::vector<py::ssize_t>(index.shape(), index.shape() + index.ndim()));
  T* to = out.mutable_data();
  const T* from = static_cast<const T*>(a.data());
  along_axis(a, axis, index, out, [&](Index at, Index out_at) { to[out_at] = from[at]; });
  return std::move(out);
}

// the dtypes the loops above are built for, as NumPy numbers them; a native byte order (NumPy writes it
// '=', or '|' for one byte)
template <typename T>
bool holds(const py::array& a) {
  const py::dtype dtype = a.dtype();
  return dtype.normalized_num() == py::dtype::num_of<T>() && (dtype.byteorder() == '=' || dtype.byteorder() == '|');
}

// Calls fn(T{}) for the element type T of `a` (float32, float64, int64, int32), with
// `others` of that dtype too and `index` int64: one binding that reads the dtype once, where an overload
// per dtype made pybind11 try (and fail) each one before it (most of a small call's time). TypeError for
// another dtype, as the overloads' failure raised it.
template <typename Fn>
auto by_dtype(const char* name, const py::array& a, const py::array& index, std::initializer_list<const py::array*> others,
              Fn fn) {
  auto all_of = [&](auto tag) {
    using T = decltype(tag);
    if (!holds<T>(a)) return false;
    for (const py::array* other : others) {
      if (!holds<T>(*other)) return false;
    }
    return true;
  };
  if (holds<Index>(index)) {
    if (all_of(float{})) return fn(float{});
    if (all_of(double{})) return fn(double{});
    if (all_of(std::int64_t{})) return fn(std::int64_t{});
    if (all_of(std::int32_t{})) return fn(std::int32_t{});
  }
  throw py::type_error(std::string(name) + ": expected float32, float64, int64 or int32 arrays of one dtype and an int64 index");
}

void host_scatter_along(const py::array& out, int axis, const py::array& index, const py::array& src, int how) {
  by_dtype("host_scatter_along", out, index, {&src}, [&](auto tag) { scatter_along<decltype(tag)>(out, axis, index, src, how); });
}

py::array host_gather_along(const py::array& a, int axis, const py::array& index) {
  return by_dtype("host_gather_along", a, index, {}, [&](auto tag) { return gather_along<decltype(tag)>(a, axis, index); });
}

// out (row-major, written in place) with src's slices along dim combined at the 1-D index's positions
// (src row-major, of out's shape but index's length at dim): index_copy's write (0) and index_add's sum
// (1), in index order (a repeated position takes each in turn, as NumPy's assignment and ufunc.at do)
template <typename T>
void index_along(const py::array& out, int dim, const py::array& index, const py::array& src, int how) {
  const int ndim = static_cast<int>(out.ndim());
  const auto c_style = py::array::c_style;
  if (index.ndim() != 1 || src.ndim() != ndim || dim < 0 || dim >= ndim || !(out.flags() & c_style) ||
      !(src.flags() & c_style) || (how != kWrite && how != kAdd)) {
    throw py::value_error("host_index_along: expected row-major arrays of one rank, a 1-d index and a dim of them");
  }
  const Index k = static_cast<Index>(index.shape()[0]), n = static_cast<Index>(out.shape()[dim]);
  Index outer = 1, inner = 1;
  for (int d = 0; d < ndim; ++d) {
    if (src.shape()[d] != (d == dim ? k : out.shape()[d])) {
      throw py::value_error("host_index_along: src must have out's shape with the index's length at dim");
    }
    if (d < dim) outer *= static_cast<Index>(out.shape()[d]);
    if (d > dim) inner *= static_cast<Index>(out.shape()[d]);
  }
  const Index* values = static_cast<const Index*>(index.data());
  const Index step = static_cast<Index>(index.strides()[0]) / static_cast<Index>(sizeof(Index));
  for (Index i = 0; i < k; ++i) {  // (checked first: nothing is written for an index out of range)
    const Index v = values[i * step];
    if (v < 0 || v >= n) {
      throw py::index_error("index " + std::to_string(v) + " is out of bounds for dim " + std::to_string(dim) +
                            " with size " + std::to_string(n));
    }
  }
  T* target = static_cast<T*>(py::array(out).mutable_data());
  const T* from = static_cast<const T*>(src.data());
  for (Index o = 0; o < outer; ++o) {
    for (Index i = 0; i < k; ++i) {
      T* to = target + (o * n + values[i * step]) * inner;
      const T* row = from + (o * k + i) * inner;
      for (Index j = 0; j < inner; ++j) to[j] = combined(how, to[j], row[j]);
    }
  }
}

void host_index_along(const py::array& out, int dim, const py::array& index, const py::array& src, int how) {
  by_dtype("host_index_along", out, index, {&src}, [&](auto tag) { index_along<decltype(tag)>(out, dim, index, src, how); });
}

// the coordinates of the true elements of a row-major bool array (at least one dim), in row-major
// order, as a new (count, ndim) int64 array: nonzero's and argwhere's result in two passes (a count,
// then the rows), where NumPy's boolean index of a coordinate grid costs several calls
py::array host_nonzero(const py::array& mask) {
  const int ndim = static_cast<int>(mask.ndim());
  if (ndim < 1 || !(mask.flags() & py::array::c_style) || mask.dtype().kind() != 'b') {
    throw py::value_error("host_nonzero: expected a row-major bool array of at least one dim");
  }
  const Index total = static_cast<Index>(mask.size());
  const bool* values = static_cast<const bool*>(mask.data());
  Index count = 0;
  for (Index k = 0; k < total; ++k) count += values[k];
  py::array_t<Index> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(count), ndim});
  Index* row = out.mutable_data();
  std::vector<Index> at(ndim, 0);
  const py::ssize_t* shape = mask.shape();
  for (Index k = 0; k < total; ++k) {
    if (values[k]) {
      for (int d = 0; d < ndim; ++d) row[d] = at[d];
      row += ndim;
    }
    for (int d = ndim - 1; d >= 0; --d) {  // the next coordinates, row-major
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
  }
  return std::move(out);
}

// int64 rows of num_classes with a 1 at each class of a row-major int64 index (any shape; the rows in
// its shape): one_hot's result in one pass; ValueError for a class outside [0, num_classes)
py::array host_one_hot(const py::array& index, Index num_classes) {
  if (!(index.flags() & py::array::c_style) || !holds<Index>(index) || num_classes < 0) {
    throw py::value_error("host_one_hot: expected a row-major int64 index and a class count");
  }
  std::vector<py::ssize_t> shape(index.shape(), index.shape() + index.ndim());
  shape.push_back(static_cast<py::ssize_t>(num_classes));
  py::array_t<Index> out(shape);
  const Index total = static_cast<Index>(index.size());
  const Index* classes = static_cast<const Index*>(index.data());
  Index* rows = out.mutable_data();
  std::fill(rows, rows + total * num_classes, Index{0});
  for (Index k = 0; k < total; ++k) {
    const Index c = classes[k];
    if (c < 0 || c >= num_classes) throw py::value_error("host_one_hot: a class out of range");
    rows[k * num_classes + c] = 1;
  }
  return std::move(out);
}

// element copies of one size, as unsigned words (the value's bits, whatever its dtype)
template <typename W>
void masked_copy(void* to, const bool* mask, const void* from, Index total) {
  W* target = static_cast<W*>(to);
  const W* next = static_cast<const W*>(from);
  for (Index k = 0; k < total; ++k) {
    if (mask[k]) target[k] = *next++;
  }
}

// out (row-major, written in place) with src's leading elements (row-major), in order, at the positions
// where mask (bool, row-major, out's size) is true: masked_scatter's write in one pass where NumPy's
// count, slice and boolean assignment cost four calls. False, with nothing written, where src has
// fewer elements than mask selects; ValueError/TypeError for arrays of another layout or dtype.
bool host_masked_scatter(const py::array& out, const py::array& mask, const py::array& src) {
  const auto c_style = py::array::c_style;
  if (!(out.flags() & c_style) || !(mask.flags() & c_style) || !(src.flags() & c_style) || mask.size() != out.size()) {
    throw py::value_error("host_masked_scatter: expected row-major arrays, the mask of out's size");
  }
  if (mask.dtype().kind() != 'b' ||
      !py::detail::npy_api::get().PyArray_EquivTypes_(out.dtype().ptr(), src.dtype().ptr())) {
    throw py::type_error("host_masked_scatter: expected a bool mask and out and src of one dtype");
  }
  const Index total = static_cast<Index>(out.size());
  const bool* selected = static_cast<const bool*>(mask.data());
  Index count = 0;
  for (Index k = 0; k < total; ++k) count += selected[k];
  if (count > static_cast<Index>(src.size())) return false;
  void* to = py::array(out).mutable_data();
  switch (out.itemsize()) {
    case 1: masked_copy<std::uint8_t>(to, selected, src.data(), total); break;
    case 2: masked_copy<std::uint16_t>(to, selected, src.data(), total); break;
    case 4: masked_copy<std::uint32_t>(to, selected, src.data(), total); break;
    case 8: masked_copy<std::uint64_t>(to, selected, src.data(), total); break;
    default: {  // (complex128 and the like: one memcpy an element)
      const py::ssize_t size = out.itemsize();
      char* target = static_cast<char*>(to);
      const char* next = static_cast<const char*>(src.data());
      for (Index k = 0; k < total; ++k) {
        if (selected[k]) {
          std::memcpy(target + k * size, next, static_cast<std::size_t>(size));
          next += size;
        }
      }
    }
  }
  return true;
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

}  // namespace

void bind_index(py::module_& m) {
  // no array_t conversion (noconvert): another dtype is the caller's to handle (NumPy's path)
  m.def("host_scatter_along", &host_scatter_along, py::arg("out"), py::arg("axis"), py::arg("index"), py::arg("src"),
        py::arg("how"),
        "out (written in place) combined with src at index along axis: written (0), added (1), multiplied (2), "
        "the larger (3) or smaller (4) kept; IndexError for an index value outside [0, size).");
  m.def("host_gather_along", &host_gather_along, py::arg("a"), py::arg("axis"), py::arg("index"),
        "A new array of index's shape: a's elements at index along axis; IndexError as host_scatter_along.");
  m.def("host_index_along", &host_index_along, py::arg("out"), py::arg("dim"), py::arg("index"), py::arg("src"),
        py::arg("how"),
        "out (row-major) with src's slices along dim written (0) or added (1) at the 1-d int64 index's positions; "
        "IndexError (nothing written) for an index value outside [0, size).");
  m.def("host_nonzero", &host_nonzero, py::arg("mask"),
        "The (count, ndim) int64 coordinates of a row-major bool array's true elements, row-major.");
  m.def("host_one_hot", &host_one_hot, py::arg("index"), py::arg("num_classes"),
        "int64 one-hot rows (index's shape + (num_classes,)) of a row-major int64 index; ValueError for a "
        "class out of range.");
  m.def("host_masked_scatter", &host_masked_scatter, py::arg("out"), py::arg("mask"), py::arg("src"),
        "out (row-major) with src's leading elements written in order where the bool mask is true; False "
        "(nothing written) where src has too few.");
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
