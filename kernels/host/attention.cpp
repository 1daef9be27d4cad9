// The CPU backend's attention forward (adcuda/backends/cpu/attention.py) for small C-contiguous
// float32/float64 q (B..., L, E), k (B..., S, E), v (B..., S, Ev) of one batch shape, without a mask
// (causal or not) or dropout: the scores, their softmax and the product with v, row after row, in one
// call. NumPy makes each of those steps a call of a microsecond or more (a dozen in all) on the small
// arrays of a per-op call, where the arithmetic is a few hundred nanoseconds. The formulas are the NumPy
// path's shifted ones, which stay the reference (tests/test_attention_plain.py compares the two): the
// row's maximum m (NaN propagates; a non-finite one is taken as 0), logsumexp = log(sum exp(s - m)) + m,
// probabilities exp(s - logsumexp) (exp(s - inf) = 0 where the logsumexp is not finite), in the
// arrays' dtype. Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "bind_types.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// (out (B..., L, Ev), logsumexp (B..., L)) of softmax(q k^T * scale) v, keys after the query's own
// position hidden where ``is_causal`` (PyTorch's top-left aligned mask).
template <typename T>
py::tuple attention(const RowMajor<T>& q, const RowMajor<T>& k, const RowMajor<T>& v, bool is_causal, double scale) {
  const Index nd = q.ndim();
  if (nd < 2 || k.ndim() != nd || v.ndim() != nd)
    throw std::invalid_argument("cpu_attention: q, k and v need the same number of dims, at least 2");
  Index batch = 1;
  for (Index d = 0; d < nd - 2; ++d) {
    if (k.shape(d) != q.shape(d) || v.shape(d) != q.shape(d))
      throw std::invalid_argument("cpu_attention: q, k and v need the same batch dims");
    batch *= q.shape(d);
  }
  const Index L = q.shape(nd - 2), E = q.shape(nd - 1), S = k.shape(nd - 2), Ev = v.shape(nd - 1);
  if (k.shape(nd - 1) != E || v.shape(nd - 2) != S)
    throw std::invalid_argument("cpu_attention: q and k need the same last dim, k and v the same dim -2");
  std::vector<py::ssize_t> out_shape(q.shape(), q.shape() + nd);
  out_shape[nd - 1] = Ev;
  py::array_t<T> out(out_shape);
  py::array_t<T> lse(std::vector<py::ssize_t>(q.shape(), q.shape() + nd - 1));
  const T* qd = q.data();
  const T* kd = k.data();
  const T* vd = v.data();
  T* o = out.mutable_data();
  T* l = lse.mutable_data();
  const T scale_t = T(scale);
  const T inf = std::numeric_limits<T>::infinity();
  {
    py::gil_scoped_release release;
    std::vector<T> scaled(static_cast<std::size_t>(E)), s(static_cast<std::size_t>(S));
    for (Index b = 0; b < batch; ++b) {
      const T* kb = kd + b * S * E;
      const T* vb = vd + b * S * Ev;
      for (Index i = 0; i < L; ++i, o += Ev, ++l) {
        const T* qi = qd + (b * L + i) * E;
        for (Index e = 0; e < E; ++e) scaled[e] = qi[e] * scale_t;  // q scaled first, as NumPy's path does
        const Index seen = is_causal ? std::min(S, i + 1) : S;
        T m = -inf;
        for (Index j = 0; j < seen; ++j) {
          T dot = T(0);
          for (Index e = 0; e < E; ++e) dot += scaled[e] * kb[j * E + e];
          s[j] = dot;
          if (dot > m || dot != dot) m = dot;  // NumPy's maximum: a NaN is the maximum
          if (m != m) break;
        }
        if (!std::isfinite(m)) {
          if (m != m) {  // a NaN score: the whole row is NaN
            for (Index e = 0; e < Ev; ++e) o[e] = m;
            *l = m;
            continue;
          }
          m = T(0);
        }
        T sum = T(0);
        for (Index j = 0; j < seen; ++j) sum += std::exp(s[j] - m);
        const T row_lse = std::log(sum) + m;
        *l = row_lse;
        const T shift = std::isfinite(row_lse) ? row_lse : inf;
        for (Index e = 0; e < Ev; ++e) o[e] = T(0);
        for (Index j = 0; j < seen; ++j) {
          const T p = std::exp(s[j] - shift);
          const T* vj = vb + j * Ev;
          for (Index e = 0; e < Ev; ++e) o[e] += p * vj[e];
        }
      }
    }
  }
  return py::make_tuple(out, lse);
}

}  // namespace

void bind_attention(py::module_& m) {
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  for_types<float, double>([&](auto type) {
    using T = decltype(type);
    m.def("cpu_attention", &attention<T>, py::arg("q").noconvert(), py::arg("k").noconvert(),
          py::arg("v").noconvert(), py::arg("is_causal"), py::arg("scale"),
          "(out, logsumexp) of softmax(q k^T * scale) v (keys after the query's position hidden where is_causal) "
          "of C-contiguous float32/float64 q (B..., L, E), k (B..., S, E), v (B..., S, Ev) of one dtype and batch "
          "shape: the CPU backend's attention without mask or dropout.");
  });
}

}  // namespace adcuda::host
