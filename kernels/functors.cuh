// The elementwise math, written once: each functor is a __host__ __device__ template over the compute
// type C (float for float/half/bfloat16 storage, double for float64, the integer type itself for
// integers), so the kernels in elementwise_*.cu instantiate it per storage type and a host test can run
// the very same code. Semantics follow the CPU backend (adcuda/backends/cpu/elementwise.py): NumPy's NaN rules
// (maximum/minimum propagate NaN, sign(NaN) = 0), floor division as NumPy's divmod, remainder and
// fmod as PyTorch's, and sigmoid evaluated from exp(-|x|) so it never overflows.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace adcuda::math {

// nvcc compiles them for both sides; a plain C++ compiler (the host module _C of every install, with or
// without nvcc: kernels/host/special_unary.h) sees ordinary inline functions.
#if defined(__CUDACC__)
#define ADCUDA_HD __host__ __device__ __forceinline__
#else
#define ADCUDA_HD inline
#endif

template <typename C>
inline constexpr bool is_float_v = std::is_floating_point_v<C>;

// float and double overloads chosen explicitly, so that host and device code pick the same function.
template <typename C> ADCUDA_HD C exp_(C x) { if constexpr (std::is_same_v<C, float>) return ::expf(x); else return ::exp(x); }
template <typename C> ADCUDA_HD C log_(C x) { if constexpr (std::is_same_v<C, float>) return ::logf(x); else return ::log(x); }
template <typename C> ADCUDA_HD C log1p_(C x) { if constexpr (std::is_same_v<C, float>) return ::log1pf(x); else return ::log1p(x); }
template <typename C> ADCUDA_HD C sqrt_(C x) { if constexpr (std::is_same_v<C, float>) return ::sqrtf(x); else return ::sqrt(x); }
template <typename C> ADCUDA_HD C sin_(C x) { if constexpr (std::is_same_v<C, float>) return ::sinf(x); else return ::sin(x); }
template <typename C> ADCUDA_HD C cos_(C x) { if constexpr (std::is_same_v<C, float>) return ::cosf(x); else return ::cos(x); }
template <typename C> ADCUDA_HD C tanh_(C x) { if constexpr (std::is_same_v<C, float>) return ::tanhf(x); else return ::tanh(x); }
template <typename C> ADCUDA_HD C erf_(C x) { if constexpr (std::is_same_v<C, float>) return ::erff(x); else return ::erf(x); }
template <typename C> ADCUDA_HD C floor_(C x) { if constexpr (std::is_same_v<C, float>) return ::floorf(x); else return ::floor(x); }
template <typename C> ADCUDA_HD C ceil_(C x) { if constexpr (std::is_same_v<C, float>) return ::ceilf(x); else return ::ceil(x); }
template <typename C> ADCUDA_HD C trunc_(C x) { if constexpr (std::is_same_v<C, float>) return ::truncf(x); else return ::trunc(x); }
template <typename C> ADCUDA_HD C rint_(C x) { if constexpr (std::is_same_v<C, float>) return ::rintf(x); else return ::rint(x); }
template <typename C> ADCUDA_HD C exp2_(C x) { if constexpr (std::is_same_v<C, float>) return ::exp2f(x); else return ::exp2(x); }
template <typename C> ADCUDA_HD C log2_(C x) { if constexpr (std::is_same_v<C, float>) return ::log2f(x); else return ::log2(x); }
template <typename C> ADCUDA_HD C log10_(C x) { if constexpr (std::is_same_v<C, float>) return ::log10f(x); else return ::log10(x); }
template <typename C> ADCUDA_HD C pow_(C x, C y) { if constexpr (std::is_same_v<C, float>) return ::powf(x, y); else return ::pow(x, y); }
template <typename C> ADCUDA_HD C fmod_(C x, C y) { if constexpr (std::is_same_v<C, float>) return ::fmodf(x, y); else return ::fmod(x, y); }
template <typename C> ADCUDA_HD C copysign_(C x, C y) { if constexpr (std::is_same_v<C, float>) return ::copysignf(x, y); else return ::copysign(x, y); }
template <typename C> ADCUDA_HD C hypot_(C x, C y) { if constexpr (std::is_same_v<C, float>) return ::hypotf(x, y); else return ::hypot(x, y); }
// inverse trigonometric and hyperbolic functions, erfc and atan2 (issue 27's names)
template <typename C> ADCUDA_HD C asin_(C x) { if constexpr (std::is_same_v<C, float>) return ::asinf(x); else return ::asin(x); }
template <typename C> ADCUDA_HD C acos_(C x) { if constexpr (std::is_same_v<C, float>) return ::acosf(x); else return ::acos(x); }
template <typename C> ADCUDA_HD C atan_(C x) { if constexpr (std::is_same_v<C, float>) return ::atanf(x); else return ::atan(x); }
template <typename C> ADCUDA_HD C asinh_(C x) { if constexpr (std::is_same_v<C, float>) return ::asinhf(x); else return ::asinh(x); }
template <typename C> ADCUDA_HD C acosh_(C x) { if constexpr (std::is_same_v<C, float>) return ::acoshf(x); else return ::acosh(x); }
template <typename C> ADCUDA_HD C atanh_(C x) { if constexpr (std::is_same_v<C, float>) return ::atanhf(x); else return ::atanh(x); }
template <typename C> ADCUDA_HD C erfc_(C x) { if constexpr (std::is_same_v<C, float>) return ::erfcf(x); else return ::erfc(x); }
template <typename C> ADCUDA_HD C atan2_(C y, C x) { if constexpr (std::is_same_v<C, float>) return ::atan2f(y, x); else return ::atan2(y, x); }
// issue 31's one-primitive hyperbolic functions and activations
template <typename C> ADCUDA_HD C expm1_(C x) { if constexpr (std::is_same_v<C, float>) return ::expm1f(x); else return ::expm1(x); }
template <typename C> ADCUDA_HD C sinh_(C x) { if constexpr (std::is_same_v<C, float>) return ::sinhf(x); else return ::sinh(x); }
template <typename C> ADCUDA_HD C cosh_(C x) { if constexpr (std::is_same_v<C, float>) return ::coshf(x); else return ::cosh(x); }
template <typename C> ADCUDA_HD C tan_(C x) { if constexpr (std::is_same_v<C, float>) return ::tanf(x); else return ::tan(x); }

template <typename C>
ADCUDA_HD bool is_nan(C x) {
  if constexpr (is_float_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

// Constants of the GELU family, in C.
template <typename C> ADCUDA_HD C inv_sqrt_2() { return C(0.70710678118654752440); }
template <typename C> ADCUDA_HD C inv_sqrt_2pi() { return C(0.39894228040143267794); }
template <typename C> ADCUDA_HD C sqrt_2_over_pi() { return C(0.79788456080286535588); }
template <typename C> ADCUDA_HD C gelu_tanh_coefficient() { return C(0.044715); }

// Integer arithmetic wraps around, as NumPy's does. Signed types compute in their unsigned type, where
// wrapping is defined: signed overflow is undefined behaviour (on the device too), which the compiler
// may assume never happens.
template <typename C>
inline constexpr bool is_signed_integer_v = std::is_integral_v<C> && std::is_signed_v<C>;
template <typename C> ADCUDA_HD C wrapping_add(C a, C b) {
  if constexpr (is_signed_integer_v<C>) return static_cast<C>(std::make_unsigned_t<C>(a) + std::make_unsigned_t<C>(b));
  else return a + b;
}
template <typename C> ADCUDA_HD C wrapping_sub(C a, C b) {
  if constexpr (is_signed_integer_v<C>) return static_cast<C>(std::make_unsigned_t<C>(a) - std::make_unsigned_t<C>(b));
  else return a - b;
}
template <typename C> ADCUDA_HD C wrapping_mul(C a, C b) {
  if constexpr (is_signed_integer_v<C>) return static_cast<C>(std::make_unsigned_t<C>(a) * std::make_unsigned_t<C>(b));
  else return a * b;
}
template <typename C> ADCUDA_HD C wrapping_neg(C x) {
  if constexpr (is_signed_integer_v<C>) return static_cast<C>(std::make_unsigned_t<C>(0) - std::make_unsigned_t<C>(x));
  else return -x;
}

template <typename C>
ADCUDA_HD C sigmoid(C x) {
  const C e = exp_(x < C(0) ? x : -x);  // exp(-|x|): never overflows
  return x >= C(0) ? C(1) / (C(1) + e) : e / (C(1) + e);
}

// ---------------------------------------------------------------------------------------------------
// unary ops: C -> C (logical_not: C -> bool)
struct Neg { template <typename C> ADCUDA_HD C operator()(C x) const { return wrapping_neg(x); } };
struct Abs {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    if constexpr (is_float_v<C>) return x < C(0) ? -x : (x == C(0) ? C(0) : x);  // abs(-0.0) = 0.0
    else return x < C(0) ? wrapping_neg(x) : x;  // abs(min) = min, as in NumPy
  }
};
struct Exp { template <typename C> ADCUDA_HD C operator()(C x) const { return exp_(x); } };
struct Log { template <typename C> ADCUDA_HD C operator()(C x) const { return log_(x); } };
struct Log1p { template <typename C> ADCUDA_HD C operator()(C x) const { return log1p_(x); } };
struct Sqrt { template <typename C> ADCUDA_HD C operator()(C x) const { return sqrt_(x); } };
// 1 / sqrt(x) as the CPU computes it (rsqrtf would differ in the last bits).
struct Rsqrt { template <typename C> ADCUDA_HD C operator()(C x) const { return C(1) / sqrt_(x); } };
struct Sin { template <typename C> ADCUDA_HD C operator()(C x) const { return sin_(x); } };
struct Cos { template <typename C> ADCUDA_HD C operator()(C x) const { return cos_(x); } };
struct Tanh { template <typename C> ADCUDA_HD C operator()(C x) const { return tanh_(x); } };
struct Sigmoid { template <typename C> ADCUDA_HD C operator()(C x) const { return sigmoid(x); } };
// NaN stays NaN (NumPy's maximum(x, 0) propagates it).
struct Relu { template <typename C> ADCUDA_HD C operator()(C x) const { return x < C(0) ? C(0) : x; } };
struct Gelu {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    return C(0.5) * x * (C(1) + erf_(x * inv_sqrt_2<C>()));
  }
};
// gelu_tanh's tanh argument u = sqrt(2 / pi) (x + 0.044715 x^3), and its value and derivative given x and
// u: the functors below, and the host's loops that keep u between forward and backward
// (kernels/host/elementwise_avx2.cpp).
template <typename C> ADCUDA_HD C gelu_tanh_inner(C x) {
  return sqrt_2_over_pi<C>() * (x + gelu_tanh_coefficient<C>() * x * x * x);
}
template <typename C> ADCUDA_HD C gelu_tanh_of(C x, C u) { return C(0.5) * x * (C(1) + tanh_(u)); }
// With s = sigmoid(2u) = (1 + tanh u) / 2: 1 - tanh^2 u = 4 s (1 - s). Written with s, the tails keep
// their precision; 1 + tanh u cancels to 0 for u << 0 where the gradient is still ~1e-6.
template <typename C> ADCUDA_HD C gelu_tanh_slope(C x, C u) {
  const C s = C(1) / (C(1) + exp_(C(-2) * u));
  return s + C(2) * x * s * (C(1) - s) * sqrt_2_over_pi<C>() * (C(1) + C(3) * gelu_tanh_coefficient<C>() * x * x);
}
struct GeluTanh {
  template <typename C> ADCUDA_HD C operator()(C x) const { return gelu_tanh_of(x, gelu_tanh_inner(x)); }
};
struct Silu { template <typename C> ADCUDA_HD C operator()(C x) const { return x * sigmoid(x); } };
struct Sign {
  template <typename C> ADCUDA_HD C operator()(C x) const { return C((x > C(0)) - (x < C(0))); }  // NaN -> 0
};
struct Erf { template <typename C> ADCUDA_HD C operator()(C x) const { return erf_(x); } };
struct Floor { template <typename C> ADCUDA_HD C operator()(C x) const { return floor_(x); } };
struct Ceil { template <typename C> ADCUDA_HD C operator()(C x) const { return ceil_(x); } };
struct Trunc { template <typename C> ADCUDA_HD C operator()(C x) const { return trunc_(x); } };
// Half to even, as np.round.
struct Round { template <typename C> ADCUDA_HD C operator()(C x) const { return rint_(x); } };
struct Exp2 { template <typename C> ADCUDA_HD C operator()(C x) const { return exp2_(x); } };
struct Log2 { template <typename C> ADCUDA_HD C operator()(C x) const { return log2_(x); } };
struct Log10 { template <typename C> ADCUDA_HD C operator()(C x) const { return log10_(x); } };
struct Asin { template <typename C> ADCUDA_HD C operator()(C x) const { return asin_(x); } };
struct Acos { template <typename C> ADCUDA_HD C operator()(C x) const { return acos_(x); } };
struct Atan { template <typename C> ADCUDA_HD C operator()(C x) const { return atan_(x); } };
struct Asinh { template <typename C> ADCUDA_HD C operator()(C x) const { return asinh_(x); } };
struct Acosh { template <typename C> ADCUDA_HD C operator()(C x) const { return acosh_(x); } };
struct Atanh { template <typename C> ADCUDA_HD C operator()(C x) const { return atanh_(x); } };
// In double and rounded once, as the CPU's: erfcf's tail (1e-45 near x = 10) is a subnormal ulp off.
struct Erfc { template <typename C> ADCUDA_HD C operator()(C x) const { return C(erfc_(double(x))); } };
// The activations and hyperbolic functions of issue 31 (the CPU formulas: backends/cpu/elementwise.py's
// _selu, _softplus, ...): no exp of a positive number where it could overflow; a NaN stays NaN.
struct Expm1 { template <typename C> ADCUDA_HD C operator()(C x) const { return expm1_(x); } };
struct Sinh { template <typename C> ADCUDA_HD C operator()(C x) const { return sinh_(x); } };
struct Cosh { template <typename C> ADCUDA_HD C operator()(C x) const { return cosh_(x); } };
struct Tan { template <typename C> ADCUDA_HD C operator()(C x) const { return tan_(x); } };
struct Selu {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    const C alpha = C(1.6732632423543772848170429916717), scale = C(1.0507009873554804934193349852946);
    return (x <= C(0) ? expm1_(x) * alpha : x) * scale;
  }
};
template <typename C> ADCUDA_HD C softplus_smooth(C x) {  // log1p(exp(-|x|)) + max(x, 0)
  return log1p_(exp_(x < C(0) ? x : -x)) + (x > C(0) ? x : C(0));
}
struct Softplus {
  template <typename C> ADCUDA_HD C operator()(C x) const { return x > C(20) ? x : softplus_smooth(x); }
};
// x * tanh(softplus(x)) with one exp: tanh(log(1 + n)) = n (n + 2) / (n (n + 2) + 2) for n = e^x (the
// three transcendental calls of the composition were most of the op's time); 1 from x > 20 on, where
// tanh(softplus(x)) rounds to 1 in float64 and n * n would overflow float32 from x = 44
struct Mish {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    if (x > C(20)) return x;
    const C n = exp_(x), m = n * (n + C(2));
    return x * (m / (m + C(2)));
  }
};
template <typename C> ADCUDA_HD C relu6_(C x) { return x < C(0) ? C(0) : (x > C(6) ? C(6) : x); }  // NaN stays
struct Hardsigmoid { template <typename C> ADCUDA_HD C operator()(C x) const { return relu6_(x + C(3)) / C(6); } };
struct Hardswish { template <typename C> ADCUDA_HD C operator()(C x) const { return x * relu6_(x + C(3)) / C(6); } };
struct Softsign {
  template <typename C> ADCUDA_HD C operator()(C x) const { return x / ((x < C(0) ? -x : x) + C(1)); }
};
struct Tanhshrink { template <typename C> ADCUDA_HD C operator()(C x) const { return x - tanh_(x); } };
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): exact for very negative x, as PyTorch's log_sigmoid.
struct Logsigmoid { template <typename C> ADCUDA_HD C operator()(C x) const { return -softplus_smooth(-x); } };
// sin(pi x) / (pi x), 1 at 0, with pi x rounded to C first, as PyTorch's kernel.
struct Sinc {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    if (x == C(0)) return C(1);
    const C y = x * C(3.14159265358979323846);
    return sin_(y) / y;
  }
};
// The fractional part x - trunc(x) (NaN at the infinities), as PyTorch's frac.
struct Frac { template <typename C> ADCUDA_HD C operator()(C x) const { return x - trunc_(x); } };
// log(x / (1 - x)), rounded as written, as PyTorch's logit without eps.
struct Logit { template <typename C> ADCUDA_HD C operator()(C x) const { return log_(x / (C(1) - x)); } };
// frexp's two parts, x = mantissa * 2^exponent with |mantissa| in [0.5, 1): the C library's frexp, in
// double (exact for every float and half value); a zero, an infinity or NaN is its own mantissa, with
// exponent 0. The exponent is a value of C (an integer of at most 11 bits: exact in every float type).
struct FrexpMantissa {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    int exponent = 0;
    return C(::frexp(double(x), &exponent));
  }
};
struct FrexpExponent {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    const double d = double(x);
    if (!(d - d == 0.0)) return C(0);  // an infinity or NaN
    int exponent = 0;
    ::frexp(d, &exponent);
    return C(exponent);
  }
};

// The gamma family and erfinv: computed in double whatever C is, with the CPU backend's algorithm
// (adcuda/backends/cpu/_special.py), so both backends agree to their math libraries' last bits. The
// recurrences shift x up to 10, where the asymptotic series (to x^-14, x^-15) reach double rounding;
// negative arguments are reflected; erfinv polishes Winitzki's closed form with two Halley steps.
namespace special {
constexpr double kPi = 3.14159265358979323846;
constexpr double kShiftTo = 10.0;
ADCUDA_HD double bernoulli_2k(int k) {  // B_2 .. B_14
  constexpr double b[7] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  return b[k];
}
// sin(pi x) and tan(pi x), reduced to [-1, 1] and [-1/2, 1/2] first (exactly; rint rounds half to even
// as NumPy's round), so that large |x| keeps its digits and tiny |x| is not rounded onto an integer.
// On the device sinpi/cospi take the reduced argument: ::sin and ::tan of a double would carry their
// slow path for huge arguments (Payne-Hanek, a 40-byte local array: local memory in every kernel of
// the gamma family), which the reduction has already made unreachable.
#ifdef __CUDA_ARCH__
ADCUDA_HD double sin_pi(double x) { return ::sinpi(x - 2.0 * ::rint(0.5 * x)); }
ADCUDA_HD double tan_pi(double x) {
  const double r = x - ::rint(x);
  return ::sinpi(r) / ::cospi(r);
}
#else
ADCUDA_HD double sin_pi(double x) { return ::sin(kPi * (x - 2.0 * ::rint(0.5 * x))); }
ADCUDA_HD double tan_pi(double x) { return ::tan(kPi * (x - ::rint(x))); }
#endif
ADCUDA_HD double digamma_positive(double x) {
  double acc = 0.0;
  while (x < kShiftTo) { acc -= 1.0 / x; x += 1.0; }
  const double t = 1.0 / (x * x);
  double series = 0.0;
  for (int k = 6; k >= 0; --k) series = (series + bernoulli_2k(k) / (2 * (k + 1))) * t;
  return acc + ::log(x) - 0.5 / x - series;
}
ADCUDA_HD double trigamma_positive(double x) {
  double acc = 0.0;
  while (x < kShiftTo) { acc += 1.0 / (x * x); x += 1.0; }
  const double inverse = 1.0 / x, t = inverse * inverse;
  double series = 0.0;
  for (int k = 6; k >= 0; --k) series = (series + bernoulli_2k(k)) * t;
  return acc + inverse + 0.5 * t + inverse * series;
}
ADCUDA_HD double digamma(double x) {
  if (x != x || x == -INFINITY) return NAN;
  if (x == INFINITY) return INFINITY;
  if (x == 0.0) return ::copysign(INFINITY, -x);  // psi(+0) = -inf, psi(-0) = inf, as PyTorch
  if (x < 0.0) {
    if (x == ::floor(x)) return NAN;
    return digamma_positive(1.0 - x) - kPi / tan_pi(x);
  }
  return digamma_positive(x);
}
ADCUDA_HD double trigamma(double x) {
  if (x != x || x == -INFINITY) return NAN;
  if (x == INFINITY) return 0.0;
  if (x <= 0.0 && x == ::floor(x)) return INFINITY;
  if (x < 0.0) {
    const double s = sin_pi(x);
    return kPi * kPi / (s * s) - trigamma_positive(1.0 - x);
  }
  return trigamma_positive(x);
}
// Shifted up to kShiftTo (dividing by the product of the shifts), Stirling's series there, reflected
// below 0: the CPU backend's lgamma, operation for operation. For a float result (``single``), an
// argument below 7 is shifted by 7 at once, in a product of fixed length: the series is accurate to
// 1e-14 from 7 on, and the loop's varying count (a mispredicted branch per element) was a third of the
// cost; the float results are the loop's but for rounding near a tie (tests/test_special_native.py).
ADCUDA_HD double lgamma(double x, bool single = false) {
  if (x != x) return x;
  if (x == INFINITY || (x <= 0.0 && x == ::floor(x))) return INFINITY;  // the poles and -inf
  if (x == 1.0 || x == 2.0) return 0.0;  // exactly, as the roots' rounding would not give
  const bool reflect = x < 0.0;
  double z = reflect ? 1.0 - x : x;
  double product = 1.0;
  if (single) {
    if (z < 7.0) {
      product = z * (z + 1.0) * (z + 2.0) * (z + 3.0) * (z + 4.0) * (z + 5.0) * (z + 6.0);
      z += 7.0;
    }
  } else {
    while (z < kShiftTo) { product *= z; z += 1.0; }
  }
  const double inverse = 1.0 / z, t = inverse * inverse;
  double series = 0.0;
  for (int k = 6; k >= 0; --k) series = (series + bernoulli_2k(k) / ((2 * k + 2) * (2 * k + 1))) * t;
  const double stirling = (z - 0.5) * ::log(z) - z + 0.91893853320467274178 + z * series;
  constexpr double log_pi = 1.14472988584940017414;
  if (single && reflect && ::fabs(x) >= 1e-8) {
    // a float result: the shift's product and the reflection's sine under one log (one log fewer)
    return log_pi - stirling + ::log(product / ::fabs(sin_pi(x)));
  }
  const double result = stirling - ::log(product);
  if (!reflect) return result;
  // log(pi / |sin(pi x)|) without overflow; below 1e-8, sin(pi x) = pi x to double precision, and taken
  // so, as pi x itself would lose digits among the subnormal numbers
  const double log_sin = ::fabs(x) < 1e-8 ? log_pi + ::log(::fabs(x)) : ::log(::fabs(sin_pi(x)));
  return log_pi - log_sin - result;
}
// c0 + c1 t + c2 t^2 + ..., by Horner's rule, unrolled (no array: nothing in a kernel's local memory)
ADCUDA_HD constexpr double polynomial(double) { return 0.0; }
template <typename... Rest>
ADCUDA_HD constexpr double polynomial(double t, double c, Rest... rest) {
  return c + t * polynomial(t, rest...);
}
// erfinv(z) = z p(w), w = -log(1 - z^2), p a polynomial in w - 2.5 below w = 5 (|z| < 0.9966) and in
// sqrt(w) - 3 above: least-squares fits of this project (Chebyshev nodes, against mpmath's erfinv) to a
// relative 2e-12 and 1.3e-10 (up to w = 37, z = 1 - 1e-16). A float result needs no more: the guess
// rounds to the float nearest erfinv(z) but within 1e-10 of a tie, a tenth of the cost of the refined
// double result below (its two erf and exp), which the reference computes; both agree to a few float ulp
// (tests/test_special_native.py).
ADCUDA_HD double erfinv_guess(double z) {
  const double w = -::log1p(-z * z);
  if (w < 5.0) {
    return z * polynomial(w - 2.5,
                        1.5014093511111335, 0.24664027673112157, -0.004177317731364821, -0.0012527078285753412,
                        0.00021825028771274232, -4.996219578946e-06, -3.4166493474365066e-06, 4.788352023599805e-07,
                        1.3435347575170446e-08, -1.0906193494905635e-08, 9.01064880202622e-10,
                        1.2976544494027488e-10, -2.9956628192034365e-11, -3.3598260445350304e-13,
                        4.309200322137591e-13);
  }
  return z * polynomial(::sqrt(w) - 3.0,
                      2.8329767988593626, 1.0016752792407344, 0.009445510520044253, -0.007643865595355732,
                      0.005685376892832803, -0.003558476272155745, 0.0014824773639369561, -0.00014897809572749572,
                      -0.00027972858055414, 0.00020267849960551034, -4.915147600695259e-05, -1.7001068114673887e-05,
                      1.916026153002555e-05, -7.920414898559052e-06, 1.8727878942740154e-06, -2.4916422670372383e-07,
                      1.2748702748899832e-08, 8.250323713110616e-10, -1.0287292796011344e-10);
}
// A double result: Winitzki's closed form (about 2e-3 relative error) refined by two Halley steps, as the
// CPU reference (_special.py) computes it, operation for operation; a float one: the polynomial guess
// above, rounded (no step: ``guess``).
ADCUDA_HD double erfinv(double z, bool guess = false) {
  if (z == 1.0) return INFINITY;
  if (z == -1.0) return -INFINITY;
  if (!(z > -1.0 && z < 1.0)) return NAN;
  if (guess) return erfinv_guess(z);
  constexpr double a = 0.147;
  const double log_term = ::log1p(-z * z);
  const double first = 2.0 / (kPi * a) + 0.5 * log_term;
  double y = ::copysign(::sqrt(::sqrt(first * first - log_term / a) - first), z);
  for (int step = 0; step < 2; ++step) {  // (_special.py's _HALLEY_STEPS)
    const double f = ::erf(y) - z;
    const double slope = 1.1283791670955126 * ::exp(-y * y);  // 2 / sqrt(pi) exp(-y^2)
    y = y - f / (slope + y * f);
  }
  return y;
}
// The modified Bessel function of the first kind of order 0: the power series sum_k (x^2/4)^k / (k!)^2
// below |x| = 20 (every term positive: no cancellation; they fall below double rounding of the sum
// after about 1.75 |x| of them), the asymptotic series e^|x| / sqrt(2 pi |x|) sum_k a_k / |x|^k above,
// e^|x| / sqrt(2 pi |x|) taken as one exp so that it overflows only with the result.
ADCUDA_HD double i0(double x) {
  const double ax = ::fabs(x);
  if (ax < 20.0) {
    const double quarter_square = ax * ax / 4.0;
    double term = 1.0, total = 1.0;
    const int terms = static_cast<int>(1.75 * ax) + 12;
    for (int k = 1; k < terms; ++k) {
      term *= quarter_square / (double(k) * double(k));
      total += term;
    }
    return total;
  }
  const double inverse = 1.0 / ax;
  double term = 1.0, series = 1.0;
  for (int k = 1; k < 16; ++k) {
    term *= inverse * ((2.0 * k - 1.0) * (2.0 * k - 1.0) / (8.0 * k));
    series += term;
  }
  return ::exp(ax - 0.5 * ::log(2.0 * kPi * ax)) * series;
}
}  // namespace special
// PyTorch's i0 multiplies by e^|x| in C (float for the half types): inf wherever that overflows, though
// I0 itself is a little smaller, and NaN at +-inf (inf times its series' 0); NaN stays NaN.
struct I0 {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    const double ax = ::fabs(double(x));
    const double exp_overflow = std::is_same_v<C, float> ? 88.72283905206835 : 709.782712893384;
    if (ax == INFINITY) return C(NAN);
    if (ax > exp_overflow) return C(INFINITY);
    return C(special::i0(double(x)));
  }
};
struct Lgamma {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    return C(special::lgamma(double(x), std::is_same_v<C, float>));
  }
};
struct Digamma { template <typename C> ADCUDA_HD C operator()(C x) const { return C(special::digamma(double(x))); } };
struct Trigamma { template <typename C> ADCUDA_HD C operator()(C x) const { return C(special::trigamma(double(x))); } };
// (a float result is the guess rounded: see special::erfinv)
struct Erfinv {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    return C(special::erfinv(double(x), std::is_same_v<C, float>));
  }
};
struct BitwiseNot {
  template <typename C> ADCUDA_HD C operator()(C x) const {
    if constexpr (std::is_same_v<C, bool>) return !x;
    else return ~x;
  }
};
// NaN is truthy, as in NumPy.
struct LogicalNot { template <typename C> ADCUDA_HD bool operator()(C x) const { return x == C(0); } };

// ---------------------------------------------------------------------------------------------------
// gradients of unary ops: (x, y, g) -> dL/dx, from the input x and/or the output y
// relu's backward is given the output as `x` (y > 0 exactly where x > 0); PyTorch's threshold_backward:
// 0 where it is <= 0, the gradient elsewhere (a NaN output too)
struct ReluBackward {
  template <typename C> ADCUDA_HD C operator()(C x, C, C g) const { return x <= C(0) ? C(0) : g; }
};
struct GeluBackward {
  template <typename C> ADCUDA_HD C operator()(C x, C, C g) const {
    const C cdf = C(0.5) * (C(1) + erf_(x * inv_sqrt_2<C>()));
    const C pdf = inv_sqrt_2pi<C>() * exp_(C(-0.5) * x * x);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {
  template <typename C> ADCUDA_HD C operator()(C x, C, C g) const { return g * gelu_tanh_slope(x, gelu_tanh_inner(x)); }
};
struct SiluBackward {
  template <typename C> ADCUDA_HD C operator()(C x, C, C g) const {
    const C s = sigmoid(x);
    return g * (s * (C(1) + x * (C(1) - s)));
  }
};
struct SigmoidBackward {
  template <typename C> ADCUDA_HD C operator()(C, C y, C g) const { return g * y * (C(1) - y); }
};
struct TanhBackward {
  template <typename C> ADCUDA_HD C operator()(C, C y, C g) const { return g * (C(1) - y * y); }
};

// ---------------------------------------------------------------------------------------------------
// binary ops: (C, C) -> C, or -> bool for comparisons and logical ops
struct Add { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return wrapping_add(a, b); } };
struct Sub { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return wrapping_sub(a, b); } };
struct Mul { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return wrapping_mul(a, b); } };
struct Div { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return a / b; } };

// log(exp(a) + exp(b)) without overflow, as NumPy's npy_logaddexp: the larger operand plus
// log1p(exp(-|a - b|)); equal operands (infinities included) give a + log 2; NaN propagates.
struct LogAddExp {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if (a == b) return a + C(0.69314718055994530942);
    const C d = a - b;
    if (d > C(0)) return a + log1p_(exp_(-d));
    if (d <= C(0)) return b + log1p_(exp_(d));
    return d;  // NaN
  }
};

// log2(2^a + 2^b) without overflow, as NumPy's npy_logaddexp2: the larger operand plus
// log1p(2^-|a - b|) / ln 2; equal operands (infinities included) give a + 1; NaN propagates.
struct LogAddExp2 {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if (a == b) return a + C(1);
    const C d = a - b;
    if (d > C(0)) return a + log1p_(exp2_(-d)) * C(1.44269504088896340736);
    if (d <= C(0)) return b + log1p_(exp2_(d)) * C(1.44269504088896340736);
    return d;  // NaN
  }
};

// The magnitude of a with the sign bit of b (NaN's too), as the C library's copysign.
struct Copysign { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return copysign_(a, b); } };
// The maximum and minimum that take a NaN only where both are NaN (the C library's fmax and fmin).
struct Fmax { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return a < b || a != a ? b : a; } };
struct Fmin { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return a > b || a != a ? b : a; } };
// a log(b), 0 where a is 0 (log(0) and log(inf) included) unless b is NaN, as PyTorch's xlogy.
struct Xlogy {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if (b != b) return b;
    if (a == C(0)) return C(0);
    return a * log_(b);
  }
};

// sqrt(a^2 + b^2) without overflow or underflow of the squares (the C library's hypot).
struct Hypot { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return hypot_(a, b); } };
// The angle of the point (b, a): atan2(input, other), as the C library's, signed zeros included.
struct Atan2 { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return atan2_(a, b); } };
// The activations and step functions of a tensor and one parameter (PyTorch's kernels' formulas; a
// NaN input stays NaN, but heaviside's, which is 0): hardshrink(x, lambd), 0 where -lambd <= x <= lambd;
// softshrink(x, lambd), x moved lambd towards 0, 0 between (x - x, +0); celu(x, alpha), alpha
// expm1(x / alpha) where x <= 0 (x times 1 / alpha, as PyTorch's elu's input scale); heaviside(x, v), 0
// below 0, v at 0, 1 above.
struct Hardshrink {
  template <typename C> ADCUDA_HD C operator()(C x, C lambd) const { return x >= -lambd && x <= lambd ? C(0) : x; }
};
struct Softshrink {
  template <typename C> ADCUDA_HD C operator()(C x, C lambd) const {
    return x > lambd ? x - lambd : (x < -lambd ? x + lambd : x - x);
  }
};
struct Celu {
  template <typename C> ADCUDA_HD C operator()(C x, C alpha) const {
    return x <= C(0) ? expm1_(x * (C(1) / alpha)) * alpha : x;
  }
};
// prelu(x, weight): x where positive, weight x elsewhere (NaN stays). nan_to_num(x, bound): NaN to 0, x
// clamped to [-bound, bound] (the largest finite value of the tensor's dtype: the infinities to it).
struct Prelu {
  template <typename C> ADCUDA_HD C operator()(C x, C weight) const { return x > C(0) ? x : weight * x; }
};
struct NanToNum {
  template <typename C> ADCUDA_HD C operator()(C x, C bound) const {
    return x != x ? C(0) : (x > bound ? bound : (x < -bound ? -bound : x));
  }
};
// The Kaiser window at ratio r (a position's offset from the middle over half the width, in [-1, 1]):
// i0(beta sqrt(1 - r^2)) / i0(beta), 1 - r^2 taken as 0 where rounding made it negative (NaN kept).
struct KaiserWindow {
  template <typename C> ADCUDA_HD C operator()(C ratio, C beta) const {
    const C inside = C(1) - ratio * ratio;
    const I0 i0;
    return i0(beta * sqrt_(inside < C(0) ? C(0) : inside)) / i0(beta);
  }
};
struct Heaviside {
  template <typename C> ADCUDA_HD C operator()(C x, C v) const { return x == C(0) ? v : (x > C(0) ? C(1) : C(0)); }
};

// The greatest common divisor and least common multiple of integers, non-negative, as PyTorch's: on the
// magnitudes in the unsigned type (|INT_MIN| has no signed value; it wraps back as PyTorch's does).
template <typename C>
ADCUDA_HD std::make_unsigned_t<C> magnitude(C x) {
  using U = std::make_unsigned_t<C>;
  return x < C(0) ? U(U(0) - U(x)) : U(x);
}
template <typename C>
ADCUDA_HD std::make_unsigned_t<C> gcd_magnitudes(C a, C b) {
  auto x = magnitude(a), y = magnitude(b);
  while (x != 0) {
    const auto r = y % x;
    y = x;
    x = r;
  }
  return y;
}
struct Gcd { template <typename C> ADCUDA_HD C operator()(C a, C b) const { return C(gcd_magnitudes(a, b)); } };
struct Lcm {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    const auto g = gcd_magnitudes(a, b);
    return g == 0 ? C(0) : C(magnitude(a) / g * magnitude(b));
  }
};

// Integers to non-negative integer powers by squaring (the host rejects negative exponents first).
struct Pow {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if constexpr (is_float_v<C>) {
      return pow_(a, b);
    } else {
      C result = 1;
      C base = a;
      for (C e = b; e > 0; e >>= 1) {
        if (e & 1) result = wrapping_mul(result, base);
        base = wrapping_mul(base, base);
      }
      return result;
    }
  }
};

// maximum / minimum with NumPy's NaN propagation.
struct Maximum {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a < b ? b : a;
  }
};
struct Minimum {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return b < a ? b : a;
  }
};

// NumPy's npy_divmod: the floor quotient and the remainder with the divisor's sign.
template <typename C>
ADCUDA_HD void float_divmod(C a, C b, C& floordiv, C& modulus) {
  C mod = fmod_(a, b);
  if (b == C(0)) {
    modulus = mod;
    floordiv = a / b;
    return;
  }
  C div = (a - mod) / b;
  if (mod != C(0)) {
    if ((b < C(0)) != (mod < C(0))) {
      mod += b;
      div -= C(1);
    }
  } else {
    mod = copysign_(C(0), b);
  }
  if (div != C(0)) {
    floordiv = floor_(div);
    if (div - floordiv > C(0.5)) floordiv += C(1);
  } else {
    floordiv = copysign_(C(0), a / b);
  }
  modulus = mod;
}

// Python's floor division and modulo for integers; b == -1 is done by negation so that the most
// negative value wraps as in NumPy instead of trapping. (The host rejects b == 0 first.)
struct FloorDivide {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if constexpr (is_float_v<C>) {
      C q, r;
      float_divmod(a, b, q, r);
      return q;
    } else {
      using U = std::make_unsigned_t<C>;
      if (b == C(-1)) return static_cast<C>(U(0) - static_cast<U>(a));
      C q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
  }
};
// PyTorch's modulo for floats: fmod moved by one divisor where its sign differs from the divisor's; a
// zero keeps fmod's sign (the dividend's), where NumPy's divmod gives it the divisor's.
struct Remainder {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if constexpr (is_float_v<C>) {
      const C mod = fmod_(a, b);
      return mod != C(0) && ((b < C(0)) != (mod < C(0))) ? mod + b : mod;
    } else {
      if (b == C(-1)) return C(0);
      C r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};

// C's fmod: the remainder with the dividend's sign, exact. For integers truncated division's
// remainder; b == -1 gives 0 without the trap of the most negative value. (The host rejects b == 0.)
struct Fmod {
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if constexpr (is_float_v<C>) {
      return fmod_(a, b);
    } else {
      return b == C(-1) ? C(0) : a % b;
    }
  }
};

// Comparisons share one functor (and one kernel per dtype); the comparison is a warp-uniform choice.
enum class CompareOp : int { Eq, Ne, Lt, Le, Gt, Ge };
struct Compare {
  CompareOp op;
  template <typename C> ADCUDA_HD bool operator()(C a, C b) const {
    switch (op) {
      case CompareOp::Eq: return a == b;
      case CompareOp::Ne: return a != b;
      case CompareOp::Lt: return a < b;
      case CompareOp::Le: return a <= b;
      case CompareOp::Gt: return a > b;
      case CompareOp::Ge: return a >= b;
    }
    return false;
  }
};

// And/or/xor: logical on bool operands, bitwise on integers (NumPy's bitwise ops on bool are logical).
enum class BitOp : int { And, Or, Xor };
struct Bitwise {
  BitOp op;
  template <typename C> ADCUDA_HD C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      switch (op) {
        case BitOp::And: return a && b;
        case BitOp::Or: return a || b;
        case BitOp::Xor: return a != b;
      }
      return false;
    } else {
      switch (op) {
        case BitOp::And: return a & b;
        case BitOp::Or: return a | b;
        case BitOp::Xor: return a ^ b;
      }
      return C(0);
    }
  }
};

// ---------------------------------------------------------------------------------------------------
// clamp: either bound may be absent; a NaN input stays NaN, a NaN bound gives NaN (as NumPy's
// maximum/minimum with that bound).
template <typename C>
struct Clamp {
  C lo, hi;
  bool has_lo, has_hi;
  ADCUDA_HD C operator()(C x) const {
    if (has_lo && (x < lo || is_nan(lo))) x = lo;
    if (has_hi && (hi < x || is_nan(hi))) x = hi;
    return x;
  }
};

// where(cond, a, b)
struct Select {
  template <typename C> ADCUDA_HD C operator()(bool cond, C a, C b) const { return cond ? a : b; }
};

#undef ADCUDA_HD

}  // namespace adcuda::math
