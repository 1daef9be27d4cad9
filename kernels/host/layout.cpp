// The CPU backend's joins (adcuda/backends/cpu/layout.py's cat, and stack's lane) as one pass that copies
// each part's rows into a new array. NumPy's concatenate spends about 0.1 us a part on its checks and
// conversions, which on a batch of small rows (stack of 32 vectors, a cat of a few small tensors) is most
// of the call; this loop checks what it needs (a C-contiguous ndarray of one plain dtype, the same sizes
// but along the axis) and copies bytes. Anything else it leaves to NumPy (None): another layout, dtype or
// shape, where NumPy's concatenate is the reference it is tested against (tests/test_cpu_fast_paths.py).
// Built in every install, with or without CUDA; the GIL is held (meant for the small arrays where calls
// dominate).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// Whether values of this dtype may be copied as bytes (no object references, no fields)
bool plain_kind(const py::dtype& dtype) {
  const char kind = dtype.kind();
  return kind == 'b' || kind == 'i' || kind == 'u' || kind == 'f' || kind == 'c';
}

// `arrays` joined along `axis` (with `stacked`: along a new axis inserted there, all of one shape), a new
// C-contiguous array of their dtype; None where one is not a C-contiguous ndarray of the first's plain
// dtype, the sizes but along the axis differ, or the axis is out of range (the caller's path then names it).
py::object host_join(const py::list& arrays, Index axis, bool stacked) {
  const std::size_t count = arrays.size();
  if (count == 0) {
    return py::none();
  }
  std::vector<py::array> parts;
  parts.reserve(count);
  for (py::handle h : arrays) {
    if (!py::isinstance<py::array>(h)) {
      return py::none();
    }
    parts.push_back(py::reinterpret_borrow<py::array>(h));
  }
  const py::array& first = parts[0];
  const py::dtype dtype = first.dtype();
  const Index ndim = first.ndim();
  if (!plain_kind(dtype) || axis < 0 || axis >= (stacked ? ndim + 1 : ndim)) {
    return py::none();
  }
  const Index item = static_cast<Index>(first.itemsize());
  std::vector<py::ssize_t> shape(first.shape(), first.shape() + ndim);
  std::vector<Index> row_bytes(count);  // each part's bytes per step of the dims before the axis
  Index joined = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const py::array& a = parts[i];
    if (a.ndim() != ndim || !(a.flags() & py::array::c_style)) {
      return py::none();
    }
    const py::dtype own = a.dtype();
    if (!own.is(dtype) && !own.equal(dtype)) {
      return py::none();
    }
    Index bytes = item;
    for (Index d = 0; d < ndim; ++d) {
      if ((stacked || d != axis) && a.shape(d) != shape[d]) {
        return py::none();
      }
      if (d >= axis) {
        bytes *= a.shape(d);
      }
    }
    row_bytes[i] = bytes;
    joined += stacked ? 1 : a.shape(axis);
  }
  Index outer = 1;
  for (Index d = 0; d < axis; ++d) {
    outer *= shape[d];
  }
  if (stacked) {
    shape.insert(shape.begin() + axis, static_cast<py::ssize_t>(joined));
  } else {
    shape[axis] = static_cast<py::ssize_t>(joined);
  }
  py::array out(dtype, shape);
  char* dst = static_cast<char*>(out.mutable_data());
  for (Index o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < count; ++i) {
      const Index bytes = row_bytes[i];
      if (bytes) {
        std::memcpy(dst, static_cast<const char*>(parts[i].data()) + o * bytes, static_cast<std::size_t>(bytes));
        dst += bytes;
      }
    }
  }
  return std::move(out);
}

}  // namespace

void bind_layout(py::module_& m) {
  m.def("host_join", &host_join, py::arg("arrays"), py::arg("axis"), py::arg("stacked"),
        "The arrays joined along axis (stacked: along a new axis there), C-contiguous; None where the host "
        "loop does not take them (NumPy's concatenate then does).");
}

}  // namespace adcuda::host
