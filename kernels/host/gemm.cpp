// The CPU cosine similarity of two C-contiguous float32/float64 arrays of one shape along one axis
// (adcuda/ops/gemm.py's cosine_similarity outside a graph): per position of the other axes, the two
// norms sqrt(sum x^2) clamped below at eps, then sum (x1 / |x1|) (x2 / |x2|), in the arrays' dtype, as
// the op's backend calls compute it (eleven NumPy calls on the small arrays of a per-op call, each a
// microsecond or more, where this is one). Built in every install, with or without CUDA; releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "bind_types.h"  // (RowMajor)

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// max(v, eps) with NaN kept (NumPy's clip of the norm)
template <typename T>
T clamped(T v, T eps) {
  return v < eps ? eps : v;
}

template <typename T>
py::array_t<T> cosine_similarity(const RowMajor<T>& a, const RowMajor<T>& b, Index axis, double eps) {
  const Index nd = a.ndim();
  if (b.ndim() != nd || axis < 0 || axis >= nd)
    throw std::invalid_argument("cpu_cosine_similarity: arrays of one shape and an axis among their dims expected");
  Index outer = 1, inner = 1;
  std::vector<py::ssize_t> out_shape;
  for (Index d = 0; d < nd; ++d) {
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("cpu_cosine_similarity: arrays of one shape expected");
    if (d < axis) outer *= a.shape(d);
    if (d > axis) inner *= a.shape(d);
    if (d != axis) out_shape.push_back(a.shape(d));
  }
  const Index count = a.shape(axis);
  py::array_t<T> out(out_shape);
  const T* x = a.data();
  const T* y = b.data();
  T* r = out.mutable_data();
  const T e = T(eps);
  py::gil_scoped_release release;
  for (Index o = 0; o < outer; ++o) {
    for (Index i = 0; i < inner; ++i) {
      const T* xr = x + o * count * inner + i;
      const T* yr = y + o * count * inner + i;
      T xx = T(0), yy = T(0);
      for (Index k = 0; k < count; ++k) {
        xx += xr[k * inner] * xr[k * inner];
        yy += yr[k * inner] * yr[k * inner];
      }
      const T nx = clamped(std::sqrt(xx), e), ny = clamped(std::sqrt(yy), e);
      T sum = T(0);
      for (Index k = 0; k < count; ++k) sum += (xr[k * inner] / nx) * (yr[k * inner] / ny);
      r[o * inner + i] = sum;
    }
  }
  return out;
}

}  // namespace

void bind_gemm(py::module_& m) {
  const char* doc =
      "Cosine similarity of C-contiguous float32/float64 arrays of one shape and dtype along axis (0 <= axis < ndim): "
      "sum (a / max(|a|, eps)) (b / max(|b|, eps)), in their dtype.";
  // (noconvert: another dtype or a strided array is the caller's to handle)
  m.def("cpu_cosine_similarity", &cosine_similarity<float>, py::arg("a").noconvert(), py::arg("b").noconvert(),
        py::arg("axis"), py::arg("eps"));
  m.def("cpu_cosine_similarity", &cosine_similarity<double>, py::arg("a").noconvert(), py::arg("b").noconvert(),
        py::arg("axis"), py::arg("eps"), doc);
}

}  // namespace adcuda::host
