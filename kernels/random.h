// Random kernels (random.cu): the CUDA backend's rand, randn, randint, bernoulli and dropout primitives, drawn
// from Philox4x32-10 (philox.cuh) keyed by `seed` at counter offset `offset`. Element i of a result
// depends only on (seed, offset, i): a draw is reproducible under manual_seed and independent of the
// launch configuration, and the first n elements of a larger draw equal a draw of n.
// New contiguous arrays on `device` (-1: the current device). Plain C++ for the bindings.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// Uniform on [0, 1) with as many random bits as the dtype holds (24 for float32, 53 for float64, 11 for
// float16, 8 for bfloat16), so that rounding can never produce 1.0. Floating dtypes.
DeviceArray rand(const Dims& shape, ScalarType dtype, std::uint64_t seed, std::uint64_t offset, int device = -1);
// Standard normal by Box-Muller (computed in fp32, fp64 for float64). Floating dtypes.
DeviceArray randn(const Dims& shape, ScalarType dtype, std::uint64_t seed, std::uint64_t offset, int device = -1);
// Integers uniform on [low, high) (high > low), converted to `dtype`.
DeviceArray randint(std::int64_t low, std::int64_t high, const Dims& shape, ScalarType dtype, std::uint64_t seed,
                    std::uint64_t offset, int device = -1);
// 1 with probability p, else 0, in `dtype` (dropout masks).
DeviceArray bernoulli(const Dims& shape, double p, ScalarType dtype, std::uint64_t seed, std::uint64_t offset,
                      int device = -1);

// Dropout in one pass over contiguous floating `x`: (out, bool mask) where mask is exactly what
// bernoulli(x.shape, 1 - p, bool, seed, offset) draws (the kept elements) and out = x * mask * scale,
// scale = 1 / (1 - p) (0 for p == 1), computed in fp32 (fp64 for float64).
std::pair<DeviceArray, DeviceArray> dropout(const DeviceArray& x, double p, std::uint64_t seed, std::uint64_t offset);
// Dropout's backward from the saved bool mask: g * mask * scale (g and mask contiguous, one shape).
DeviceArray dropout_backward(const DeviceArray& g, const DeviceArray& mask, double scale);

}  // namespace adcuda
