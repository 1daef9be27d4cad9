// CUDA's device built-ins for host code: warp shuffles and votes, block barriers, atomics, and the
// math/bit intrinsics that have no host definition in the CUDA headers. Each follows the CUDA C++
// Programming Guide's definition (shuffle source lanes and widths, what atomics return); where the
// GPU's result is undefined (a lane reading from a lane outside the mask) the emulator fails the
// launch instead of guessing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "emulator/grid.h"

// CUDA declares the classification functions in the global namespace for device code.
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

// --- Block and warp synchronisation -----------------------------------------------------------------
inline void __syncthreads() { adcuda::emu::block_barrier(0, 0); }
inline int __syncthreads_count(int predicate) { return adcuda::emu::block_barrier(predicate, 1); }
inline int __syncthreads_and(int predicate) { return adcuda::emu::block_barrier(predicate, 2); }
inline int __syncthreads_or(int predicate) { return adcuda::emu::block_barrier(predicate, 3); }

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  adcuda::emu::warp_collective<char, int>(mask, 0, [](const char (&)[32], int) { return 0; }, "__syncwarp");
}

inline unsigned __activemask() { return adcuda::emu::live_lanes(); }

namespace adcuda::emu {

template <typename T>
struct ShuffleIn {
  T value;
  int source;  // the lane this lane reads from
};

inline int segment_base(int lane, int width) { return lane & ~(width - 1); }

template <typename T>
T shuffle(unsigned mask, T value, int source, const char* what) {
  static_assert(std::is_trivially_copyable_v<T>, "shuffled values are copied bytewise");
  return warp_collective<ShuffleIn<T>, T>(
      mask, ShuffleIn<T>{value, source},
      [mask, what](const ShuffleIn<T> (&all)[32], int lane) {
        const int from = all[lane].source;
        if (!(mask & (1u << from))) {
          kernel_fault((std::string(what) + ": lane " + std::to_string(lane) + " reads lane " +
                        std::to_string(from) + ", which is not in the mask (undefined on the GPU)")
                           .c_str());
        }
        return all[from].value;
      },
      what);
}

}  // namespace adcuda::emu

template <typename T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = 32) {
  const int lane = adcuda::emu::lane_id();
  const int source = adcuda::emu::segment_base(lane, width) + (source_lane & (width - 1));
  return adcuda::emu::shuffle(mask, value, source, "__shfl_sync");
}

template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const int lane = adcuda::emu::lane_id();
  const int within = lane & (width - 1);
  const int source = within >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : lane;
  return adcuda::emu::shuffle(mask, value, source, "__shfl_up_sync");
}

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const int lane = adcuda::emu::lane_id();
  const int within = lane & (width - 1);
  const int source = within + static_cast<int>(delta) < width ? lane + static_cast<int>(delta) : lane;
  return adcuda::emu::shuffle(mask, value, source, "__shfl_down_sync");
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  const int lane = adcuda::emu::lane_id();
  int source = lane ^ lane_mask;
  if (adcuda::emu::segment_base(source, width) != adcuda::emu::segment_base(lane, width)) source = lane;
  return adcuda::emu::shuffle(mask, value, source, "__shfl_xor_sync");
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return adcuda::emu::warp_collective<int, unsigned>(
      mask, predicate != 0,
      [mask](const int (&all)[32], int) {
        unsigned bits = 0;
        for (int lane = 0; lane < 32; ++lane) {
          if ((mask & (1u << lane)) && all[lane]) bits |= 1u << lane;
        }
        return bits;
      },
      "__ballot_sync");
}

inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }

// --- Memory fences, loads, clocks: the emulator is sequentially consistent -------------------------
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
template <typename T>
T __ldg(const T* pointer) {
  return *pointer;
}
template <typename T>
T __ldcs(const T* pointer) {
  return *pointer;
}
template <typename T>
void __stcs(T* pointer, T value) {
  *pointer = value;
}
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void __nanosleep(unsigned) {}
// Only the emulated PTX wrappers would use the shared-window address, and they take pointers instead.
inline std::size_t __cvta_generic_to_shared(const void* pointer) { return reinterpret_cast<std::size_t>(pointer); }
[[noreturn]] inline void __trap() { adcuda::emu::kernel_fault("__trap() called in a kernel"); }

// --- Atomics: one host thread runs the grid, so plain read-modify-write is atomic ------------------
template <typename T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
inline __half atomicAdd(__half* address, __half value) {
  const __half old = *address;
  *address = __float2half(__half2float(old) + __half2float(value));
  return old;
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 value) {
  const __nv_bfloat16 old = *address;
  *address = __float2bfloat16(__bfloat162float(old) + __bfloat162float(value));
  return old;
}
template <typename T>
T atomicSub(T* address, T value) {
  const T old = *address;
  *address = old - value;
  return old;
}
template <typename T>
T atomicExch(T* address, T value) {
  const T old = *address;
  *address = value;
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  const T old = *address;
  *address = value < old ? value : old;
  return old;
}
template <typename T>
T atomicMax(T* address, T value) {
  const T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  const T old = *address;
  if (old == compare) *address = value;
  return old;
}
template <typename T>
T atomicAnd(T* address, T value) {
  const T old = *address;
  *address = old & value;
  return old;
}
template <typename T>
T atomicOr(T* address, T value) {
  const T old = *address;
  *address = old | value;
  return old;
}
template <typename T>
T atomicXor(T* address, T value) {
  const T old = *address;
  *address = old ^ value;
  return old;
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  const unsigned old = *address;
  *address = old >= limit ? 0u : old + 1u;
  return old;
}

// --- Bit reinterpretation and integer intrinsics ---------------------------------------------------
namespace adcuda::emu {
template <typename To, typename From>
To bits(From value) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}
}  // namespace adcuda::emu

inline int __float_as_int(float x) { return adcuda::emu::bits<int>(x); }
inline unsigned __float_as_uint(float x) { return adcuda::emu::bits<unsigned>(x); }
inline float __int_as_float(int x) { return adcuda::emu::bits<float>(x); }
inline float __uint_as_float(unsigned x) { return adcuda::emu::bits<float>(x); }
inline long long __double_as_longlong(double x) { return adcuda::emu::bits<long long>(x); }
inline double __longlong_as_double(long long x) { return adcuda::emu::bits<double>(x); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
  return static_cast<long long>((static_cast<__int128>(a) * b) >> 64);
}

// --- Float intrinsics: the fast approximations are computed exactly here -----------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rz(float x) { return static_cast<unsigned>(x); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline long long __float2ll_rz(float x) { return static_cast<long long>(x); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(std::nearbyint(x)); }
inline long long __double2ll_rz(double x) { return static_cast<long long>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float sinpif(float x) { return std::sin(3.14159265358979323846f * x); }
inline float cospif(float x) { return std::cos(3.14159265358979323846f * x); }
inline double sinpi(double x) { return std::sin(3.14159265358979323846 * x); }
inline double cospi(double x) { return std::cos(3.14159265358979323846 * x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }

namespace adcuda::emu {
// Inverse error function: Giles' single-precision polynomial, then two Newton steps on erf in double.
inline double erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -HUGE_VAL : NAN;
  if (y >= 1.0) return y == 1.0 ? HUGE_VAL : NAN;
  double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i) {
    const double err = std::erf(x) - y;
    x -= err / (1.1283791670955126 * std::exp(-x * x));
  }
  return x;
}
}  // namespace adcuda::emu
inline float erfinvf(float y) { return static_cast<float>(adcuda::emu::erfinv(y)); }
inline double erfinv(double y) { return adcuda::emu::erfinv(y); }
inline float erfcinvf(float y) { return static_cast<float>(adcuda::emu::erfinv(1.0 - y)); }
inline double erfcinv(double y) { return adcuda::emu::erfinv(1.0 - y); }

// CUDA's global min/max overloads (device code calls them unqualified on ints and floats alike).
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmin(C(a), C(b));
  return C(b) < C(a) ? C(b) : C(a);
}
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmax(C(a), C(b));
  return C(a) < C(b) ? C(b) : C(a);
}
