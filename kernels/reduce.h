// Reduction kernels (reduce.cu): the CUDA backend's reduce, argreduce, var and logsumexp primitives,
// with the CPU backend's semantics (adcuda/backends/cpu/reduce.py). Plain C++ for the bindings.
//
// Any set of axes of any strided input, with keepdim. Half types accumulate in fp32; integer and bool
// sums and products in int64 (and give int64). Empty reductions give the op's identity (sum 0, prod 1,
// all true, any false; mean and var NaN); ops without one (amax, amin, argmax, argmin, logsumexp)
// raise std::invalid_argument for them, as NumPy raises ValueError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

// op: sum prod mean amax amin all any. `axes`: distinct dims in [0, ndim) (empty: none reduced).
DeviceArray reduce(const std::string& op, const DeviceArray& a, const std::vector<std::int64_t>& axes, bool keepdim);

// op: argmax argmin (first occurrence; NaN counts as the extreme, as in NumPy). axis empty: over the
// flattened array (keepdim then gives shape (1,) * ndim). int64 result.
DeviceArray argreduce(const std::string& op, const DeviceArray& a, std::optional<std::int64_t> axis, bool keepdim);

// Sum of squared deviations / max(n - correction, 0) (Welford's single pass; floating dtypes).
DeviceArray var(const DeviceArray& a, const std::vector<std::int64_t>& axes, double correction, bool keepdim);

// log(sum(exp(a))) over `axes`, max-shifted in one pass (floating dtypes).
DeviceArray logsumexp(const DeviceArray& a, const std::vector<std::int64_t>& axes, bool keepdim);

}  // namespace adcuda
