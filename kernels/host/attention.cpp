// The CPU backend's attention forward (adcuda/backends/cpu/attention.py) for small C-contiguous
// float32/float64 q (B..., L, E), k (B..., S, E), v (B..., S, Ev) of one batch shape, without a mask
// (causal or not) or dropout: the scores, their softmax and the product with v, row after row, in one
// call. NumPy makes each of those steps a call of a microsecond or more (a dozen in all) on the small
// arrays of a per-op call, where the arithmetic is a few hundred nanoseconds. The formulas are the NumPy
// path's shifted ones, which stay the reference (tests/test_attention_plain.py compares the two): the
// row's maximum m (NaN propagates; a non-finite one is taken as 0), logsumexp = log(sum exp(s - m)) + m,
// probabilities exp(s - logsumexp) (exp(s - inf) = 0 where the logsumexp is not finite), in the
// arrays' dtype. The backward's probabilities (cpu_attention_probs) are the forward's (kept in its
// ``probs`` by a captured program) bit for bit, as the NumPy path's are its own: one rule picks the host
// or NumPy for both. Built in every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "bind_types.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Index = std::int64_t;

// The batch count and (L, E, S, Ev) of q (B..., L, E), k (B..., S, E), v (B..., S, Ev) (v may be absent).
struct Dims {
  Index batch, L, E, S, Ev;
};

template <typename T>
Dims dims_of(const RowMajor<T>& q, const RowMajor<T>& k, const RowMajor<T>* v) {
  const Index nd = q.ndim();
  if (nd < 2 || k.ndim() != nd || (v != nullptr && v->ndim() != nd))
    throw std::invalid_argument("cpu_attention: q, k and v need the same number of dims, at least 2");
  Index batch = 1;
  for (Index d = 0; d < nd - 2; ++d) {
    if (k.shape(d) != q.shape(d) || (v != nullptr && v->shape(d) != q.shape(d)))
      throw std::invalid_argument("cpu_attention: q, k and v need the same batch dims");
    batch *= q.shape(d);
  }
  const Index S = k.shape(nd - 2), E = q.shape(nd - 1);
  if (k.shape(nd - 1) != E || (v != nullptr && v->shape(nd - 2) != S))
    throw std::invalid_argument("cpu_attention: q and k need the same last dim, k and v the same dim -2");
  return {batch, q.shape(nd - 2), E, S, v != nullptr ? v->shape(nd - 1) : 0};
}

// The scores of query row ``qi`` (q scaled first, as NumPy's path does) against the first ``seen`` keys
// of ``kb`` into ``s``; returns their maximum as NumPy's (a NaN is the maximum).
template <typename T>
T scores_row(const T* qi, const T* kb, Index E, Index seen, T scale, T* scaled, T* s) {
  for (Index e = 0; e < E; ++e) scaled[e] = qi[e] * scale;
  T m = -std::numeric_limits<T>::infinity();
  for (Index j = 0; j < seen; ++j) {
    T dot = T(0);
    for (Index e = 0; e < E; ++e) dot += scaled[e] * kb[j * E + e];
    s[j] = dot;
    if (dot > m || dot != dot) m = dot;
  }
  return m;
}

// What exp(s - logsumexp) subtracts: +inf for a row whose logsumexp is not finite (its probabilities 0).
template <typename T>
T shift_of(T lse) {
  return std::isfinite(lse) ? lse : std::numeric_limits<T>::infinity();
}

// (out (B..., L, Ev), logsumexp (B..., L)) of softmax(q k^T * scale) v, keys after the query's own
// position hidden where ``is_causal`` (PyTorch's top-left aligned mask); the probabilities into
// ``probs`` (B..., L, S) where given (0 where hidden), as ``attention_probs`` computes them again.
template <typename T>
py::tuple attention(const RowMajor<T>& q, const RowMajor<T>& k, const RowMajor<T>& v, bool is_causal, double scale,
                    std::optional<RowMajor<T>> probs) {
  const Dims d = dims_of<T>(q, k, &v);
  if (probs && probs->size() != d.batch * d.L * d.S)
    throw std::invalid_argument("cpu_attention: probs must have the scores' (B..., L, S) elements");
  std::vector<py::ssize_t> out_shape(q.shape(), q.shape() + q.ndim());
  out_shape.back() = d.Ev;
  py::array_t<T> out(out_shape);
  py::array_t<T> lse(std::vector<py::ssize_t>(q.shape(), q.shape() + q.ndim() - 1));
  const T* qd = q.data();
  const T* kd = k.data();
  const T* vd = v.data();
  T* o = out.mutable_data();
  T* l = lse.mutable_data();
  T* p_out = probs ? probs->mutable_data() : nullptr;
  {
    py::gil_scoped_release release;
    std::vector<T> scaled(static_cast<std::size_t>(d.E)), s(static_cast<std::size_t>(d.S));
    for (Index b = 0; b < d.batch; ++b) {
      const T* kb = kd + b * d.S * d.E;
      const T* vb = vd + b * d.S * d.Ev;
      for (Index i = 0; i < d.L; ++i, o += d.Ev, ++l) {
        const Index seen = is_causal ? std::min(d.S, i + 1) : d.S;
        T m = scores_row(qd + (b * d.L + i) * d.E, kb, d.E, seen, T(scale), scaled.data(), s.data());
        if (!std::isfinite(m)) m = T(0);  // (NumPy's path: a NaN or infinite maximum shifts by nothing)
        T sum = T(0);
        for (Index j = 0; j < seen; ++j) sum += std::exp(s[j] - m);
        *l = std::log(sum) + m;
        const T shift = shift_of(*l);
        for (Index e = 0; e < d.Ev; ++e) o[e] = T(0);
        for (Index j = 0; j < seen; ++j) {
          const T p = std::exp(s[j] - shift);
          if (p_out != nullptr) p_out[j] = p;
          const T* vj = vb + j * d.Ev;
          for (Index e = 0; e < d.Ev; ++e) o[e] += p * vj[e];
        }
        if (p_out != nullptr) {
          for (Index j = seen; j < d.S; ++j) p_out[j] = T(0);
          p_out += d.S;
        }
      }
    }
  }
  return py::make_tuple(out, lse);
}

// The probabilities (B..., L, S) ``attention`` computed for these q and k and its logsumexp, bit for bit:
// what its backward reads.
template <typename T>
py::array_t<T> attention_probs(const RowMajor<T>& q, const RowMajor<T>& k, const RowMajor<T>& lse, bool is_causal,
                               double scale) {
  const Dims d = dims_of<T>(q, k, nullptr);
  if (lse.size() != d.batch * d.L) throw std::invalid_argument("cpu_attention_probs: lse must have (B..., L) elements");
  std::vector<py::ssize_t> shape(q.shape(), q.shape() + q.ndim());
  shape.back() = d.S;
  py::array_t<T> probs(shape);
  const T* qd = q.data();
  const T* kd = k.data();
  const T* l = lse.data();
  T* p = probs.mutable_data();
  {
    py::gil_scoped_release release;
    std::vector<T> scaled(static_cast<std::size_t>(d.E));
    for (Index b = 0; b < d.batch; ++b) {
      for (Index i = 0; i < d.L; ++i, ++l, p += d.S) {
        const Index seen = is_causal ? std::min(d.S, i + 1) : d.S;
        scores_row(qd + (b * d.L + i) * d.E, kd + b * d.S * d.E, d.E, seen, T(scale), scaled.data(), p);
        const T shift = shift_of(*l);
        for (Index j = 0; j < seen; ++j) p[j] = std::exp(p[j] - shift);
        for (Index j = seen; j < d.S; ++j) p[j] = T(0);
      }
    }
  }
  return probs;
}

}  // namespace

void bind_attention(py::module_& m) {
  // no array_t conversion (noconvert): another dtype or a strided array is the caller's to handle
  for_types<float, double>([&](auto type) {
    using T = decltype(type);
    m.def("cpu_attention", &attention<T>, py::arg("q").noconvert(), py::arg("k").noconvert(),
          py::arg("v").noconvert(), py::arg("is_causal"), py::arg("scale"), py::arg("probs").noconvert().none(true),
          "(out, logsumexp) of softmax(q k^T * scale) v (keys after the query's position hidden where is_causal) "
          "of C-contiguous float32/float64 q (B..., L, E), k (B..., S, E), v (B..., S, Ev) of one dtype and batch "
          "shape: the CPU backend's attention without mask or dropout; the probabilities into probs (a C-contiguous "
          "writeable array of their dtype and (B..., L, S) elements) where given.");
    m.def("cpu_attention_probs", &attention_probs<T>, py::arg("q").noconvert(), py::arg("k").noconvert(),
          py::arg("lse").noconvert(), py::arg("is_causal"), py::arg("scale"),
          "The probabilities (B..., L, S) cpu_attention computes for q, k and its logsumexp lse, bit for bit.");
  });
}

}  // namespace adcuda::host
