// The per-tensor loops of the CPU backend's SGD and Adam steps (optim.cpp), built twice: for the baseline
// x86-64 (optim.cpp) and with AVX2 (optim_avx2.cpp), which the module calls only where ``cpu_has_avx2()``
// says the CPU has it. One source, the same operations in the same order with no contraction
// (-ffp-contract=off): both builds give the same numbers bit for bit, the AVX2 one on four doubles or
// eight floats at a time (the float32 -> double -> float32 roundings of SGD's fused adds, Adam's sqrt and
// divisions), about 1.3-1.8x faster on an optimizer step's arrays. The loops live in a namespace named by
// ADCUDA_HOST_ISA, which the including file defines, so that the two builds' inline functions and
// templates stay apart (one name, two machine codes, would be an ODR violation the linker resolves at
// random).
#pragma once

#include <cmath>
#include <cstdint>

namespace adcuda::host {

struct Sgd {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};

struct Adam {
  double lr, beta1, beta2, eps, weight_decay, bias_correction2_sqrt, step_size;
  bool decoupled;
};

// One tensor's update, in each build: w, g (and the momentum buffer or Adam's state) of n float32 values.
namespace baseline {
void sgd_tensor(float* w, const float* g, float* buf, std::int64_t n, const Sgd& c);
void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, std::int64_t n, const Adam& c);
}  // namespace baseline
namespace avx2 {
void sgd_tensor(float* w, const float* g, float* buf, std::int64_t n, const Sgd& c);
void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, std::int64_t n, const Adam& c);
}  // namespace avx2

#ifdef ADCUDA_HOST_ISA
namespace ADCUDA_HOST_ISA {
namespace {

using Index = std::int64_t;

// y + alpha * x rounded as the NumPy path rounds it (PyTorch's fused y.add(x, alpha=)): the product of
// a float32 and alpha rounded to float32 is exact in double, the sum is rounded to double and then
// to float32.
inline float fused_add(float y, float x, double alpha) {
  const double product = static_cast<double>(x) * alpha;
  const double sum = product + static_cast<double>(y);
  return static_cast<float>(sum);
}

// alpha as the NumPy path widens it: rounded to float32 first (np.float64(np.float32(alpha))).
inline double as_float32(double alpha) { return static_cast<double>(static_cast<float>(alpha)); }

// One tensor's SGD update; the options are template parameters so that the loop has no branch and
// vectorises (plain SGD, the common case, is one fused add an element).
template <bool kDecay, bool kMomentum, bool kFirst, bool kDampen, bool kNesterov>
void sgd_loop(float* w, const float* g, float* buf, Index n, const Sgd& c) {
  const double decay = as_float32(c.weight_decay), damped = as_float32(1.0 - c.dampening);
  const double nesterov = as_float32(c.momentum), step = as_float32(-c.lr);
  const float momentum = static_cast<float>(c.momentum);
  for (Index i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kDecay) d = fused_add(d, w[i], decay);
    if constexpr (kMomentum) {
      float b = d;
      if constexpr (!kFirst) {
        b = buf[i] * momentum;
        b = kDampen ? fused_add(b, d, damped) : b + d;
      }
      buf[i] = b;
      d = kNesterov ? fused_add(d, b, nesterov) : b;
    }
    w[i] = fused_add(w[i], d, step);
  }
}

template <bool kDecay>
void sgd_loop(float* w, const float* g, float* buf, Index n, const Sgd& c) {
  if (c.momentum == 0.0) return sgd_loop<kDecay, false, false, false, false>(w, g, buf, n, c);
  if (c.first_step)
    return c.nesterov ? sgd_loop<kDecay, true, true, false, true>(w, g, buf, n, c)
                      : sgd_loop<kDecay, true, true, false, false>(w, g, buf, n, c);
  if (c.dampening != 0.0)
    return c.nesterov ? sgd_loop<kDecay, true, false, true, true>(w, g, buf, n, c)
                      : sgd_loop<kDecay, true, false, true, false>(w, g, buf, n, c);
  return c.nesterov ? sgd_loop<kDecay, true, false, false, true>(w, g, buf, n, c)
                    : sgd_loop<kDecay, true, false, false, false>(w, g, buf, n, c);
}

// NumPy's maximum: NaN where either is NaN (a select, so the loop still vectorises)
inline float nan_maximum(float a, float b) { return (a != a || a > b) ? a : b; }

// One tensor's Adam update; the options are template parameters so that the loop has no branch and vectorises.
template <bool kDecayWeights, bool kDecayGradient, bool kAmsgrad>
void adam_loop(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  // each Python scalar meets a float32 array as NumPy 2 takes a Python float: rounded to float32
  const float keep = static_cast<float>(1.0 - c.lr * c.weight_decay), decay = static_cast<float>(c.weight_decay);
  const float one_minus_beta1 = static_cast<float>(1.0 - c.beta1), beta2 = static_cast<float>(c.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  const float correction = static_cast<float>(c.bias_correction2_sqrt), eps = static_cast<float>(c.eps);
  const float step_size = static_cast<float>(c.step_size);
  for (Index i = 0; i < n; ++i) {
    float wi = w[i], d = g[i];
    if constexpr (kDecayWeights) wi *= keep;
    if constexpr (kDecayGradient) {
      const float decayed = wi * decay;
      d = d + decayed;
    }
    float t = d - m[i];
    t *= one_minus_beta1;
    const float mi = m[i] + t;
    m[i] = mi;
    float vi = v[i] * beta2;
    t = d * d;
    t *= one_minus_beta2;
    vi += t;
    v[i] = vi;
    if constexpr (kAmsgrad) {
      vi = nan_maximum(max_v[i], vi);
      max_v[i] = vi;
    }
    t = std::sqrt(vi);
    t /= correction;
    t += eps;
    t = mi / t;
    t *= step_size;
    w[i] = wi - t;
  }
}

template <bool kDecayWeights, bool kDecayGradient>
void adam_loop(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  if (max_v != nullptr)
    adam_loop<kDecayWeights, kDecayGradient, true>(w, g, m, v, max_v, n, c);
  else
    adam_loop<kDecayWeights, kDecayGradient, false>(w, g, m, v, max_v, n, c);
}

}  // namespace

void sgd_tensor(float* w, const float* g, float* buf, Index n, const Sgd& c) {
  if (c.weight_decay != 0.0)
    sgd_loop<true>(w, g, buf, n, c);
  else
    sgd_loop<false>(w, g, buf, n, c);
}

void adam_tensor(float* w, const float* g, float* m, float* v, float* max_v, Index n, const Adam& c) {
  if (c.weight_decay == 0.0)
    adam_loop<false, false>(w, g, m, v, max_v, n, c);
  else if (c.decoupled)
    adam_loop<true, false>(w, g, m, v, max_v, n, c);
  else
    adam_loop<false, true>(w, g, m, v, max_v, n, c);
}

}  // namespace ADCUDA_HOST_ISA
#endif

}  // namespace adcuda::host
