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
// or NumPy for both. For larger calls without mask or dropout, the softmax between BLAS's products
// (cpu_attention_softmax_; the scores too for small heads, cpu_attention_scores_softmax_) and the scores'
// gradient (cpu_attention_softmax_backward_), AVX2 builds of their loops in elementwise_avx2.cpp. Built in
// every install, with or without CUDA; calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "bind_types.h"
#include "elementwise_avx2.h"

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

// The softmax of the larger calls' scores (B..., L, S), which BLAS computes (attention.py): row r
// (query r % L) in place, over its seen keys (the first min(S, r % L + 1) where ``causal``, else all):
// m = the max (a non-finite one taken as 0), e = exp(s - m), probabilities e / sum(e) (0 where the sum is
// 0: a row of -inf scores), 0 for the hidden keys; logsumexp log(sum(e)) + m. NaN propagates as in the
// NumPy path. One pass over a row in cache per step, where NumPy makes a dozen over the whole array.
template <typename T>
T softmax_row(T* s, Index seen, Index S) {
  T m = -std::numeric_limits<T>::infinity();
  for (Index j = 0; j < seen; ++j)
    if (s[j] > m || s[j] != s[j]) m = s[j];
  if (!std::isfinite(m)) m = T(0);
  T sum = T(0);
  for (Index j = 0; j < seen; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  const T inverse = sum == T(0) ? T(0) : T(1) / sum;
  for (Index j = 0; j < seen; ++j) s[j] *= inverse;
  for (Index j = seen; j < S; ++j) s[j] = T(0);
  return std::log(sum) + m;
}

template <typename T>
void softmax_rows(T* s, T* lse, Index rows, Index L, Index S, bool causal) {
  for (Index r = 0; r < rows; ++r, s += S) lse[r] = softmax_row(s, causal ? std::min(S, r % L + 1) : S, S);
}

// dp = p (dp - delta[r]) scale along each row: the scores' gradient (scale: the scores' own, so that the
// products after it give dq and dk directly).
template <typename T>
void softmax_backward_rows(T* dp, const T* p, const T* delta, T scale, Index rows, Index S) {
  for (Index r = 0; r < rows; ++r, dp += S, p += S)
    for (Index j = 0; j < S; ++j) dp[j] = p[j] * (dp[j] - delta[r]) * scale;
}

// The rows' count and length of an array of at least one dim (a 0-d one: one row of one).
std::pair<Index, Index> rows_of(const py::array& a) {
  const Index length = a.ndim() > 0 ? a.shape(a.ndim() - 1) : 1;
  return {length == 0 ? 0 : a.size() / length, length};
}

// ``s`` (B..., L, S) in place: its softmax rows (softmax_rows; AVX2 for float32 where choose_avx2 says);
// returns the logsumexps (B..., L).
template <typename T>
py::array_t<T> attention_softmax(RowMajor<T>& s, bool is_causal, std::optional<bool> avx2) {
  if (s.ndim() < 2) throw std::invalid_argument("cpu_attention_softmax_: scores need at least 2 dims (..., L, S)");
  const bool wide = std::is_same_v<T, float> && choose_avx2("cpu_attention_softmax_", avx2);
  py::array_t<T> lse(std::vector<py::ssize_t>(s.shape(), s.shape() + s.ndim() - 1));
  const Index L = s.shape(s.ndim() - 2), S = s.shape(s.ndim() - 1), rows = lse.size();
  T* data = s.mutable_data();
  T* l = lse.mutable_data();
  py::gil_scoped_release release;
  if constexpr (std::is_same_v<T, float>) {
    if (wide) return attention_softmax_avx2(data, l, rows, L, S, is_causal), lse;
  }
  softmax_rows(data, l, rows, L, S, is_causal);
  return lse;
}

// dp (B..., L, S) in place: the scores' gradient from the probabilities p (B..., L, S), their gradient
// dp = g v^T and delta = the rows' sum of g * out (g and out: (B..., L, Ev), any strides), times scale.
template <typename T>
void attention_softmax_backward(RowMajor<T>& dp, const RowMajor<T>& p, const py::array_t<T>& g,
                                const py::array_t<T>& out, double scale, std::optional<bool> avx2) {
  const auto [rows, S] = rows_of(dp);
  const auto [g_rows, Ev] = rows_of(g);
  const Index nd = g.ndim();
  bool same = p.size() == dp.size() && out.ndim() == nd && nd >= 1 && g_rows == rows;
  for (Index d = 0; same && d < nd; ++d) same = out.shape(d) == g.shape(d);
  if (!same)
    throw std::invalid_argument(
        "cpu_attention_softmax_backward_: p needs dp's size, g and out one shape (B..., L, Ev) of dp's rows");
  const bool wide = std::is_same_v<T, float> && choose_avx2("cpu_attention_softmax_backward_", avx2);
  std::vector<T> delta(static_cast<std::size_t>(rows));
  const char* gd = reinterpret_cast<const char*>(g.data());
  const char* od = reinterpret_cast<const char*>(out.data());
  T* dpd = dp.mutable_data();
  py::gil_scoped_release release;
  // (the rows in order, their index an odometer over the dims before the last: byte offsets g_at, o_at)
  std::vector<Index> index(static_cast<std::size_t>(std::max<Index>(nd - 1, 0)), 0);
  const Index g_step = g.strides(nd - 1), o_step = out.strides(nd - 1);
  Index g_at = 0, o_at = 0;
  for (Index r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (Index e = 0; e < Ev; ++e)
      sum += double(*reinterpret_cast<const T*>(gd + g_at + e * g_step)) *
             double(*reinterpret_cast<const T*>(od + o_at + e * o_step));
    delta[static_cast<std::size_t>(r)] = T(sum);
    for (Index d = nd - 2; d >= 0; --d) {
      g_at += g.strides(d);
      o_at += out.strides(d);
      if (++index[static_cast<std::size_t>(d)] < g.shape(d)) break;
      index[static_cast<std::size_t>(d)] = 0;
      g_at -= g.strides(d) * g.shape(d);
      o_at -= out.strides(d) * out.shape(d);
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (wide) return attention_softmax_backward_avx2(dpd, p.data(), delta.data(), float(scale), rows, S);
  }
  softmax_backward_rows(dpd, p.data(), delta.data(), T(scale), rows, S);
}

// The byte offset of batch entry ``b`` of an array whose first ``nd - 2`` dims are the batch dims.
Index entry_offset(const py::array& a, Index b) {
  Index at = 0;
  for (Index d = a.ndim() - 3; d >= 0; --d) {
    at += (b % a.shape(d)) * a.strides(d);
    b /= a.shape(d);
  }
  return at;
}

// The scores (q k^T) * scale computed here and made probabilities (softmax_rows) in p, for small heads,
// where BLAS's batched products of a few thousand multiply-adds each cost more than their arithmetic
// and the scores would go out to memory and back before the softmax: per batch entry, the scaled
// queries and the keys' transpose gathered once (any strides), then row by row the seen keys' scores
// (the hidden ones of a causal row never computed) and their softmax while the row is in cache.
template <typename T>
py::array_t<T> attention_scores_softmax(const py::array_t<T>& q, const py::array_t<T>& k, RowMajor<T>& p,
                                        bool is_causal, double scale, std::optional<bool> avx2) {
  const Index nd = q.ndim();
  bool fits = nd >= 2 && k.ndim() == nd && p.ndim() == nd && q.shape(nd - 1) == k.shape(nd - 1) &&
              p.shape(nd - 2) == q.shape(nd - 2) && p.shape(nd - 1) == k.shape(nd - 2);
  for (Index d = 0; fits && d < nd - 2; ++d) fits = k.shape(d) == q.shape(d) && p.shape(d) == q.shape(d);
  if (!fits)
    throw std::invalid_argument("cpu_attention_scores_softmax_: q (B..., L, E), k (B..., S, E), p (B..., L, S)");
  const bool wide = std::is_same_v<T, float> && choose_avx2("cpu_attention_scores_softmax_", avx2);
  const Index L = q.shape(nd - 2), E = q.shape(nd - 1), S = k.shape(nd - 2), width = (S + 31) / 32 * 32;
  py::array_t<T> lse(std::vector<py::ssize_t>(q.shape(), q.shape() + nd - 1));
  const Index batch = L == 0 ? 0 : lse.size() / L;
  const char* qd = reinterpret_cast<const char*>(q.data());
  const char* kd = reinterpret_cast<const char*>(k.data());
  const Index qr = q.strides(nd - 2), qe = q.strides(nd - 1), kr = k.strides(nd - 2), ke = k.strides(nd - 1);
  T* pd = p.mutable_data();
  T* l = lse.mutable_data();
  py::gil_scoped_release release;
  std::vector<T> qs(static_cast<std::size_t>(L * E)), kt(static_cast<std::size_t>(E * width), T(0));
  const T factor = T(scale);
  for (Index b = 0; b < batch; ++b, pd += L * S, l += L) {
    const char* qb = qd + entry_offset(q, b);
    const char* kb = kd + entry_offset(k, b);
    for (Index i = 0; i < L; ++i)
      for (Index e = 0; e < E; ++e) qs[i * E + e] = *reinterpret_cast<const T*>(qb + i * qr + e * qe) * factor;
    for (Index j = 0; j < S; ++j)
      for (Index e = 0; e < E; ++e) kt[e * width + j] = *reinterpret_cast<const T*>(kb + j * kr + e * ke);
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        attention_scores_softmax_avx2(qs.data(), kt.data(), pd, l, L, S, E, width, is_causal);
        continue;
      }
    }
    for (Index i = 0; i < L; ++i) {
      const Index seen = is_causal ? std::min(S, i + 1) : S;
      T* row = pd + i * S;
      for (Index j = 0; j < seen; ++j) {
        T dot = T(0);
        for (Index e = 0; e < E; ++e) dot += qs[i * E + e] * kt[e * width + j];
        row[j] = dot;
      }
      l[i] = softmax_row(row, seen, S);
    }
  }
  return lse;
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
    m.def("cpu_attention_softmax_", &attention_softmax<T>, py::arg("s").noconvert(), py::arg("is_causal"),
          py::arg("avx2") = py::none(),
          "The scores s (B..., L, S), a C-contiguous writeable float32/float64 array, made attention's "
          "probabilities in place (keys after the query's position 0 where is_causal); returns the rows' "
          "logsumexp (B..., L). avx2: which build runs (None: the CPU's best).");
    m.def("cpu_attention_scores_softmax_", &attention_scores_softmax<T>, py::arg("q").noconvert(),
          py::arg("k").noconvert(), py::arg("p").noconvert(), py::arg("is_causal"), py::arg("scale"),
          py::arg("avx2") = py::none(),
          "Attention's probabilities softmax(q k^T * scale) (keys after the query's position 0 where is_causal) "
          "of q (B..., L, E) and k (B..., S, E) of one dtype and batch shape, any strides, written into p "
          "(B..., L, S), a C-contiguous writeable array of their dtype; returns the rows' logsumexp (B..., L). "
          "avx2: which build runs (None: the CPU's best).");
    m.def("cpu_attention_softmax_backward_", &attention_softmax_backward<T>, py::arg("dp").noconvert(),
          py::arg("p").noconvert(), py::arg("g").noconvert(), py::arg("out").noconvert(), py::arg("scale"),
          py::arg("avx2") = py::none(),
          "dp (B..., L, S), the probabilities' gradient g v^T, made the scores' gradient times scale in place: "
          "p (dp - sum(g * out, -1)) scale, g and out (B..., L, Ev) of any strides.");
  });
}

}  // namespace adcuda::host
