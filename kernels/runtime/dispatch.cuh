// From a ScalarType to the C++/CUDA element type, and conversions between element types. For .cu
// files only. Kernels compute half and bfloat16 in float (compute_t), as the CPU backend computes
// float16 in float32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "runtime/scalar_type.h"

namespace adcuda {

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<U>{}) with the unsigned integer type of `itemsize` bytes (1, 2, 4, else 8): copies
// move bits, so one kernel per element size serves every dtype of that size.
template <typename F>
decltype(auto) dispatch_bits(std::size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: return f(TypeTag<std::uint8_t>{});
    case 2: return f(TypeTag<std::uint16_t>{});
    case 4: return f(TypeTag<std::uint32_t>{});
    default: return f(TypeTag<std::uint64_t>{});
  }
}

// Calls f(TypeTag<U>{}) with the widest unit of `bytes` (16, 8, 4, 2, else 1) that rows, strides and
// base addresses allow a gather to move at once: uint4 and uint2 are 128- and 64-bit loads.
template <typename F>
decltype(auto) dispatch_move_unit(int bytes, F&& f) {
  switch (bytes) {
    case 16: return f(TypeTag<uint4>{});
    case 8: return f(TypeTag<uint2>{});
    case 4: return f(TypeTag<std::uint32_t>{});
    case 2: return f(TypeTag<std::uint16_t>{});
    default: return f(TypeTag<std::uint8_t>{});
  }
}

// Calls f(TypeTag<T>{}) with the element type of `type`:
//   dispatch_type(a.dtype(), "neg", [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <typename F>
decltype(auto) dispatch_type(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Bool: return f(TypeTag<bool>{});
    case ScalarType::Int32: return f(TypeTag<std::int32_t>{});
    case ScalarType::Int64: return f(TypeTag<std::int64_t>{});
    case ScalarType::Float16: return f(TypeTag<__half>{});
    case ScalarType::BFloat16: return f(TypeTag<__nv_bfloat16>{});
    case ScalarType::Float32: return f(TypeTag<float>{});
    case ScalarType::Float64: return f(TypeTag<double>{});
  }
  throw std::invalid_argument(std::string(op) + ": unknown dtype " + std::to_string(static_cast<int>(type)));
}

// dispatch_type for an op defined on floating point dtypes only: f is instantiated for those alone.
template <typename F>
decltype(auto) dispatch_floating(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Float16: return f(TypeTag<__half>{});
    case ScalarType::BFloat16: return f(TypeTag<__nv_bfloat16>{});
    case ScalarType::Float32: return f(TypeTag<float>{});
    case ScalarType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": not defined for dtype " + scalar_type_name(type) +
                              " (floating point dtypes only)");
}

template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type arithmetic on T is done in.
template <typename T>
using compute_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

template <typename T>
__host__ __device__ __forceinline__ compute_t<T> to_compute(T value) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(value);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(value);
  } else {
    return value;
  }
}

// value as a To, with C++'s conversion rules (through float for half and bfloat16; bool is value != 0).
template <typename To, typename From>
__host__ __device__ __forceinline__ To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_compute(value) != compute_t<From>(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    if constexpr (std::is_same_v<From, double>) {
      return __double2half(value);
    } else {
      return __float2half(static_cast<float>(to_compute(value)));
    }
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    if constexpr (std::is_same_v<From, double>) {
      return __double2bfloat16(value);
    } else {
      return __float2bfloat16(static_cast<float>(to_compute(value)));
    }
  } else {
    return static_cast<To>(to_compute(value));
  }
}

}  // namespace adcuda
