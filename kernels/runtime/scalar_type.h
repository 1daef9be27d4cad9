// The element types a DeviceArray can hold. Plain C++ (no CUDA types), so that bindings and host code
// share it; kernels map each value to its C++/CUDA type with ADCUDA_DISPATCH_TYPES (dispatch.cuh).
#pragma once

#include <cstddef>
#include <cstdint>

namespace adcuda {

// Names match adcuda.dtypes (bool, int32, int64, float16, bfloat16, float32, float64).
enum class ScalarType : std::int8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64 };

constexpr std::size_t itemsize(ScalarType type) {
  switch (type) {
    case ScalarType::Bool: return 1;
    case ScalarType::Int32: return 4;
    case ScalarType::Int64: return 8;
    case ScalarType::Float16: return 2;
    case ScalarType::BFloat16: return 2;
    case ScalarType::Float32: return 4;
    case ScalarType::Float64: return 8;
  }
  return 0;
}

constexpr const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::Bool: return "bool";
    case ScalarType::Int32: return "int32";
    case ScalarType::Int64: return "int64";
    case ScalarType::Float16: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Float32: return "float32";
    case ScalarType::Float64: return "float64";
  }
  return "unknown";
}

constexpr bool is_floating_point(ScalarType type) {
  return type == ScalarType::Float16 || type == ScalarType::BFloat16 || type == ScalarType::Float32 ||
         type == ScalarType::Float64;
}

}  // namespace adcuda
