// Elementwise kernels (elementwise_unary.cu, elementwise_binary.cu): the CUDA backend's unary, binary,
// unary_backward, where and clamp primitives, with the CPU backend's semantics
// (adcuda/backends/cpu/elementwise.py). Plain C++ so that the bindings (kernels/bindings/elementwise.cpp)
// can include it.
//
// Inputs broadcast with NumPy's rules and may be any strided view; results are new contiguous arrays
// on the inputs' device. Half types are computed in fp32. Bad input raises std::invalid_argument
// (ValueError in Python): an unknown op, a dtype the op is not defined for, shapes that do not
// broadcast. Checks that need the data (integer division by zero, negative integer powers) are the
// caller's (adcuda/backends/cuda/elementwise.py), as they need a device-to-host copy.
#pragma once

#include <optional>
#include <string>

#include "runtime/copy.h"
#include "runtime/device_array.h"

namespace adcuda {

// A binary or `where` operand: an array, or a Python scalar when `array` is empty.
struct ArrayOrScalar {
  std::optional<DeviceArray> array;
  Scalar scalar = Scalar::from_int(0);
};

// op: one of elementwise_ops.def's ADCUDA_UNARY list (generated from adcuda/backends/elementwise_table.py).
// Same dtype out (logical_not: bool).
DeviceArray unary(const std::string& op, const DeviceArray& a);

// op: add sub mul div pow maximum minimum floor_divide remainder fmod (result in `dtype`), eq ne lt le gt ge
// logical_and logical_or logical_xor (bool result), bitwise_and bitwise_or bitwise_xor. Both operands
// are taken in `dtype` (arrays of another dtype are cast first); at least one must be an array.
DeviceArray binary(const std::string& op, const ArrayOrScalar& a, const ArrayOrScalar& b, ScalarType dtype);

// The gradient of unary op `op` (elementwise_ops.def's ADCUDA_UNARY_BACKWARD list, which says whether
// it reads the input x or the output y), in g's dtype: one fused kernel. relu's is given its output as
// `x`, as the CPU backend's is.
DeviceArray unary_backward(const std::string& op, const std::optional<DeviceArray>& x,
                           const std::optional<DeviceArray>& y, const DeviceArray& g);

// cond ? a : b, broadcast, in `dtype`.
DeviceArray where(const DeviceArray& cond, const ArrayOrScalar& a, const ArrayOrScalar& b, ScalarType dtype);

// min(max(a, lo), hi) with either bound absent, in a's dtype.
DeviceArray clamp(const DeviceArray& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);

}  // namespace adcuda
