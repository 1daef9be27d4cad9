// The CPU backend's gelu_tanh and gelu, forward and backward, on float32 arrays
// (adcuda/backends/cpu/elementwise.py): the CUDA kernels' own formulas (functors.cuh's gelu_tanh_of,
// gelu_tanh_slope, GeluBackward), instantiated over an eight-lane AVX2 vector, with exp, tanh and erf
// written for that vector (erf as the NumPy path's formula). NumPy evaluates them as nine to fifteen
// passes over the array, each its own SIMD loop; scalar libm's tanhf, expf and erff, one element at a
// time, are slower still. Here each element is read and written once. Also attention's softmax between
// BLAS's products (attention.cpp's softmax_rows and softmax_backward_rows, the same steps on eight lanes,
// tested against the NumPy path in tests/test_attention_plain.py).
//
// This is the one host file built with -mavx2 -mfma (CMakeLists.txt); nothing in it runs unless
// cpu_has_avx2() said the CPU has both (the module's other files are built for the baseline x86-64).
// The NumPy formulas stay the reference these are tested against (tests/test_elementwise_host.py).
#include "elementwise_avx2.h"

#include "functors.cuh"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace adcuda::host {
namespace {

// Eight float32 lanes with the arithmetic the functors use; a number converts to all eight lanes (C(0.5)
// rounds to float as C = float does).
struct F8 {
  __m256 v;
  F8() = default;
  explicit F8(__m256 value) : v(value) {}
  template <typename N, typename = std::enable_if_t<std::is_arithmetic_v<N>>>
  explicit F8(N value) : v(_mm256_set1_ps(static_cast<float>(value))) {}
};
inline F8 operator+(F8 a, F8 b) { return F8(_mm256_add_ps(a.v, b.v)); }
inline F8 operator-(F8 a, F8 b) { return F8(_mm256_sub_ps(a.v, b.v)); }
inline F8 operator*(F8 a, F8 b) { return F8(_mm256_mul_ps(a.v, b.v)); }
inline F8 operator/(F8 a, F8 b) { return F8(_mm256_div_ps(a.v, b.v)); }

inline __m256 splat(float value) { return _mm256_set1_ps(value); }

// exp: x = n ln 2 + r, |r| <= ln 2 / 2 (ln 2 in two parts, so that n ln 2 is exact), e^r by a degree-6
// polynomial fitted for relative error over that interval, times 2^n as two powers of two built in the
// exponent bits (each of them a normal float for every n from -150 to 128, so subnormal results come out
// as such). Above 88.72 infinity; NaN stays NaN (min and max return their second operand for NaN).
inline __m256 exp8(__m256 x) {
  const __m256 clamped = _mm256_max_ps(splat(-104.0f), _mm256_min_ps(splat(88.8f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(clamped, splat(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, splat(0.693359375f), clamped);
  r = _mm256_fnmadd_ps(n, splat(-2.12194440e-4f), r);
  __m256 p = splat(0.00137514085508883f);
  p = _mm256_fmadd_ps(p, r, splat(0.008368918672204018f));
  p = _mm256_fmadd_ps(p, r, splat(0.04166953265666962f));
  p = _mm256_fmadd_ps(p, r, splat(0.166665181517601f));
  p = _mm256_fmadd_ps(p, r, splat(0.49999988079071045f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, splat(1.0f)));
  const __m256i whole = _mm256_cvtps_epi32(n);
  const __m256i first = _mm256_srai_epi32(whole, 1);
  const __m256i second = _mm256_sub_epi32(whole, first);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 scale1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(first, bias), 23));
  const __m256 scale2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(second, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, scale1), scale2);
  return _mm256_blendv_ps(y, splat(INFINITY), _mm256_cmp_ps(x, splat(88.72283935546875f), _CMP_GT_OQ));
}

// tanh: for |x| < 0.55 the odd polynomial x + x^3 P(x^2) fitted for relative error there; above it
// 1 - 2 / (e^2|x| + 1) (e^2|x| = inf gives 1), the sign put back. NaN stays NaN.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, splat(-0.0f));
  const __m256 a = _mm256_andnot_ps(splat(-0.0f), x);
  const __m256 a2 = _mm256_mul_ps(a, a);
  __m256 p = splat(-0.0062876008450984955f);
  p = _mm256_fmadd_ps(p, a2, splat(0.021082019433379173f));
  p = _mm256_fmadd_ps(p, a2, splat(-0.053855109959840775f));
  p = _mm256_fmadd_ps(p, a2, splat(0.13332617282867432f));
  p = _mm256_fmadd_ps(p, a2, splat(-0.33333319425582886f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, a2), a, a);
  const __m256 e = exp8(_mm256_add_ps(a, a));
  const __m256 large = _mm256_sub_ps(splat(1.0f), _mm256_div_ps(splat(2.0f), _mm256_add_ps(e, splat(1.0f))));
  const __m256 t = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, splat(0.55f), _CMP_LT_OQ));
  return _mm256_or_ps(t, sign);
}

// (t c0 + c1) t + c2) t + c3, each step rounded as NumPy's in-place passes round it (no fused multiply-add).
inline __m256 horner4(__m256 t, float c0, float c1, float c2, float c3) {
  __m256 acc = _mm256_add_ps(_mm256_mul_ps(t, splat(c0)), splat(c1));
  acc = _mm256_add_ps(_mm256_mul_ps(acc, t), splat(c2));
  return _mm256_add_ps(_mm256_mul_ps(acc, t), splat(c3));
}

// erf as the CPU backend's NumPy formula computes it (elementwise.py's _erf: tanh(z P(z^2) / Q(z^2)), z = x
// clamped to [-5, 5], the same coefficients rounded to float32, the same order of operations), with tanh8
// for NumPy's tanh. NaN stays NaN.
inline __m256 erf8(__m256 x) {
  const __m256 z = _mm256_max_ps(splat(-5.0f), _mm256_min_ps(splat(5.0f), x));
  const __m256 z2 = _mm256_mul_ps(z, z);
  const __m256 p = horner4(z2, 0.002178269265824373f, 0.04264643124888671f, 0.27980657739233034f, 1.1283791708459951f);
  const __m256 q = horner4(z2, 0.0003249216250365561f, 0.023689835331644774f, 0.15689235506657712f, 1.0f);
  return tanh8(_mm256_mul_ps(_mm256_div_ps(p, q), z));
}

}  // namespace
}  // namespace adcuda::host

namespace adcuda::math {
template <> inline host::F8 exp_<host::F8>(host::F8 x) { return host::F8(host::exp8(x.v)); }
template <> inline host::F8 tanh_<host::F8>(host::F8 x) { return host::F8(host::tanh8(x.v)); }
template <> inline host::F8 erf_<host::F8>(host::F8 x) { return host::F8(host::erf8(x.v)); }
}  // namespace adcuda::math

namespace adcuda::host {
namespace {

inline F8 load(const float* p) { return F8(_mm256_loadu_ps(p)); }
inline void store(float* p, F8 value) { _mm256_storeu_ps(p, value.v); }

// ``body(i, count)`` over [0, n) eight at a time; the last count < 8 elements go through a padded copy
// (``tail``), so that every element takes the same vector arithmetic.
template <typename Body>
void in_eights(std::ptrdiff_t n, Body body) {
  std::ptrdiff_t i = 0;
  for (; i + 8 <= n; i += 8) body(i, 8);
  if (i < n) body(i, n - i);
}

// The up-to-8 values at p (count of them), zero-padded.
inline F8 load_some(const float* p, std::ptrdiff_t count) {
  if (count == 8) return load(p);
  alignas(32) float lanes[8] = {};
  for (std::ptrdiff_t k = 0; k < count; ++k) lanes[k] = p[k];
  return F8(_mm256_load_ps(lanes));
}

inline void store_some(float* p, F8 value, std::ptrdiff_t count) {
  if (count == 8) return store(p, value);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, value.v);
  for (std::ptrdiff_t k = 0; k < count; ++k) p[k] = lanes[k];
}

}  // namespace

bool cpu_has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

void gelu_tanh_avx2(const float* x, float* y, float* inner, std::ptrdiff_t n) {
  in_eights(n, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
    const F8 xs = load_some(x + i, count);
    const F8 u = math::gelu_tanh_inner(xs);
    if (inner != nullptr) store_some(inner + i, u, count);
    store_some(y + i, math::gelu_tanh_of(xs, u), count);
  });
}

void gelu_tanh_backward_avx2(const float* x, const float* g, const float* inner, float* out, std::ptrdiff_t n) {
  in_eights(n, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
    const F8 xs = load_some(x + i, count);
    const F8 u = inner != nullptr ? load_some(inner + i, count) : math::gelu_tanh_inner(xs);
    store_some(out + i, load_some(g + i, count) * math::gelu_tanh_slope(xs, u), count);
  });
}

void gelu_avx2(const float* x, float* y, std::ptrdiff_t n) {
  in_eights(n, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
    const F8 xs = load_some(x + i, count);
    // PyTorch's CPU order, as the NumPy path's: x (1 + erf(x / sqrt 2)) first, then halved (Gelu of
    // functors.cuh halves x first, and does not overflow where this does, above half of float's largest)
    store_some(y + i, (F8(1) + math::erf_(xs * math::inv_sqrt_2<F8>())) * xs * F8(0.5), count);
  });
}

void gelu_backward_avx2(const float* x, const float* g, float* out, std::ptrdiff_t n) {
  in_eights(n, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
    const F8 xs = load_some(x + i, count);
    store_some(out + i, math::GeluBackward{}(xs, xs, load_some(g + i, count)), count);
  });
}

void tanh_avx2(const float* x, float* y, std::ptrdiff_t n) {
  in_eights(n, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
    store_some(y + i, math::tanh_(load_some(x + i, count)), count);
  });
}

namespace {

// The lanes below ``count`` set (all bits), the others clear: a tail's lanes.
inline __m256 first_lanes(std::ptrdiff_t count) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), index));
}

inline float lanes_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float lanes_sum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

}  // namespace

namespace {

// One row of attention_softmax_avx2: the first ``seen`` of its S scores made probabilities, the rest 0.
float softmax_row(float* s, std::ptrdiff_t seen, std::ptrdiff_t S) {
  const __m256 minus_inf = splat(-std::numeric_limits<float>::infinity());
  const std::ptrdiff_t whole = seen & ~std::ptrdiff_t(7), tail = seen - whole;
  const __m256 lanes = first_lanes(tail);
  const __m256i lane_bits = _mm256_castps_si256(lanes);
  // (whole vectors, then the tail's lanes loaded masked: the rest of the row is never read)
  __m256 top = minus_inf;
  for (std::ptrdiff_t j = 0; j < whole; j += 8) top = _mm256_max_ps(top, _mm256_loadu_ps(s + j));
  if (tail) top = _mm256_max_ps(top, _mm256_blendv_ps(minus_inf, _mm256_maskload_ps(s + whole, lane_bits), lanes));
  // (max_ps may pass over a NaN; the row's sum is NaN all the same, as the baseline's)
  float m = lanes_max(top);
  if (!std::isfinite(m)) m = 0.0f;
  const __m256 shift = splat(m);
  __m256 sum = _mm256_setzero_ps();
  for (std::ptrdiff_t j = 0; j < whole; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), shift));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m256 last = _mm256_setzero_ps();
  if (tail) {
    last = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + whole, lane_bits), shift)), lanes);
    sum = _mm256_add_ps(sum, last);
  }
  const float total = lanes_sum(sum);
  const __m256 inverse = splat(total == 0.0f ? 0.0f : 1.0f / total);
  for (std::ptrdiff_t j = 0; j < whole; j += 8)
    _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inverse));
  if (tail) _mm256_maskstore_ps(s + whole, lane_bits, _mm256_mul_ps(last, inverse));
  std::fill(s + seen, s + S, 0.0f);  // the hidden keys
  return std::log(total) + m;
}

}  // namespace

void attention_softmax_avx2(float* s, float* lse, std::ptrdiff_t rows, std::ptrdiff_t L, std::ptrdiff_t S,
                            bool causal) {
  for (std::ptrdiff_t r = 0, i = 0; r < rows; ++r, s += S, i = i + 1 == L ? 0 : i + 1)
    lse[r] = softmax_row(s, causal ? std::min(S, i + 1) : S, S);
}

namespace {

// The 32 scores from the keys' transpose kt (its columns from the block's first key) of two query rows
// at a time (qa and qb, which may be one row), eight accumulators, so that the multiply-adds need not wait
// on each other.
inline void scores_block(const float* qa_row, const float* qb_row, const float* kt, std::ptrdiff_t E,
                         std::ptrdiff_t width, __m256 (&a)[4], __m256 (&b)[4]) {
  for (int t = 0; t < 4; ++t) a[t] = b[t] = _mm256_setzero_ps();
  for (std::ptrdiff_t e = 0; e < E; ++e, kt += width) {
    const __m256 qa = splat(qa_row[e]), qb = splat(qb_row[e]);
    for (int t = 0; t < 4; ++t) {
      const __m256 k8 = _mm256_loadu_ps(kt + 8 * t);
      a[t] = _mm256_fmadd_ps(qa, k8, a[t]);
      b[t] = _mm256_fmadd_ps(qb, k8, b[t]);
    }
  }
}

inline void store_scores(float* p, std::ptrdiff_t j, std::ptrdiff_t seen, std::ptrdiff_t S, const __m256 (&a)[4]) {
  for (std::ptrdiff_t t = 0; t < 4 && j + 8 * t < seen; ++t) {
    const std::ptrdiff_t at = j + 8 * t;
    if (at + 8 <= S)
      _mm256_storeu_ps(p + at, a[t]);
    else
      _mm256_maskstore_ps(p + at, _mm256_castps_si256(first_lanes(S - at)), a[t]);
  }
}

}  // namespace

void attention_scores_softmax_avx2(const float* q, const float* kt, float* p, float* lse, std::ptrdiff_t L,
                                   std::ptrdiff_t S, std::ptrdiff_t E, std::ptrdiff_t width, bool causal) {
  // (rows in pairs; a last odd row pairs with itself, its scores computed twice)
  for (std::ptrdiff_t i = 0; i < L; i += 2) {
    const std::ptrdiff_t i2 = std::min(i + 1, L - 1);
    const std::ptrdiff_t seen = causal ? std::min(S, i + 1) : S, seen2 = causal ? std::min(S, i2 + 1) : S;
    float* row = p + i * S;
    float* row2 = p + i2 * S;
    __m256 a[4], b[4];
    for (std::ptrdiff_t j = 0; j < seen2; j += 32) {
      scores_block(q + i * E, q + i2 * E, kt + j, E, width, a, b);
      store_scores(row, j, seen, S, a);
      store_scores(row2, j, seen2, S, b);
    }
    lse[i] = softmax_row(row, seen, S);
    if (i2 != i) lse[i2] = softmax_row(row2, seen2, S);
  }
}

void attention_softmax_backward_avx2(float* dp, const float* p, const float* delta, float scale,
                                     std::ptrdiff_t rows, std::ptrdiff_t S) {
  for (std::ptrdiff_t r = 0; r < rows; ++r, dp += S, p += S) {
    const F8 d(delta[r]), k(scale);
    in_eights(S, [&](std::ptrdiff_t i, std::ptrdiff_t count) {
      store_some(dp + i, load_some(p + i, count) * (load_some(dp + i, count) - d) * k, count);
    });
  }
}

}  // namespace adcuda::host

#else  // not built for AVX2: cpu_has_avx2() says no, and the CPU backend never calls the loops

namespace adcuda::host {
bool cpu_has_avx2() { return false; }
void gelu_tanh_avx2(const float*, float*, float*, std::ptrdiff_t) {}
void gelu_tanh_backward_avx2(const float*, const float*, const float*, float*, std::ptrdiff_t) {}
void gelu_avx2(const float*, float*, std::ptrdiff_t) {}
void gelu_backward_avx2(const float*, const float*, float*, std::ptrdiff_t) {}
void tanh_avx2(const float*, float*, std::ptrdiff_t) {}
void attention_softmax_avx2(float*, float*, std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, bool) {}
void attention_softmax_backward_avx2(float*, const float*, const float*, float, std::ptrdiff_t, std::ptrdiff_t) {}
void attention_scores_softmax_avx2(const float*, const float*, float*, float*, std::ptrdiff_t, std::ptrdiff_t,
                                   std::ptrdiff_t, std::ptrdiff_t, bool) {}
}  // namespace adcuda::host

#endif
