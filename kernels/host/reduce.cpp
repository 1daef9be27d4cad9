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
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

template <typename T>
py::array_t<T> host_row_variance(const py::array_t<T, py::array::c_style>& x, Index rows, double correction) {
  const Index size = static_cast<Index>(x.size());
  if (rows <= 0 || size == 0 || size % rows)
    throw std::invalid_argument("host_row_variance: rows must be positive and divide a non-empty array");
  const Index count = size / rows;
  py::array_t<T> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows)});
  const T* in = x.data();
  T* var = out.mutable_data();
  // a division by zero gives inf (or NaN for 0 / 0), as NumPy's quotient does
  const double dof = std::max(double(count) - correction, 0.0);
  for (Index r = 0; r < rows; ++r, in += count) {
    double sum = 0.0;
    for (Index k = 0; k < count; ++k) sum += double(in[k]);
    const double mean = sum / double(count);
    double squares = 0.0;
    for (Index k = 0; k < count; ++k) {
      const double d = double(in[k]) - mean;
      squares += d * d;
    }
    var[r] = T(squares / dof);
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
}

}  // namespace adcuda::host
