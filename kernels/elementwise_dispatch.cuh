// What the elementwise kernel files share (elementwise_unary.cu, elementwise_binary.cu): the errors they
// raise, how they allocate results, and which functors skip the vectorised kernel. The family is split
// in two translation units so that nvcc compiles its hundreds of kernel instantiations on two cores.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "elementwise.h"
#include "elementwise_loops.cuh"
#include "functors.cuh"

namespace adcuda::elementwise_detail {

[[noreturn]] inline void unknown_op(const char* family, const std::string& op) {
  throw std::invalid_argument(std::string(family) + ": unknown op '" + op + "'");
}

[[noreturn]] inline void undefined_for(const std::string& op, ScalarType dtype) {
  throw std::invalid_argument(op + ": not defined for dtype " + scalar_type_name(dtype));
}

inline DeviceArray new_like(const Dims& shape, ScalarType dtype, const DeviceArray& on) {
  return DeviceArray::empty(shape, dtype, on.device());
}

// Rare ops whose functors are long (trigonometric range reduction, divmod, pow) skip the vectorised
// kernel: four inlined copies each would cost build time for no training workload's benefit, and the
// range reduction's slow path keeps a local array, which the SASS check forbids in vectorised kernels.
template <typename F>
constexpr bool vectorize() {
  return !(std::is_same_v<F, math::Sin> || std::is_same_v<F, math::Cos> || std::is_same_v<F, math::Tan> ||
           std::is_same_v<F, math::Sinc> ||
           std::is_same_v<F, math::Pow> ||
           std::is_same_v<F, math::FloorDivide> || std::is_same_v<F, math::Remainder> ||
           std::is_same_v<F, math::Fmod>);
}

}  // namespace adcuda::elementwise_detail
