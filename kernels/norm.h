// Layer norm, RMS norm, group norm and batch norm forward and backward on the GPU (kernels/norm.cu): the CUDA
// backend's layer_norm, rms_norm, group_norm and batch_norm primitives and their _backward, with the CPU backend's semantics. Inputs must be contiguous and
// weight/bias share x's dtype; statistics (mean, rstd) are float32 (float64 for float64 x). Plain
// C++: included by the bindings.
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "runtime/device_array.h"

namespace adcuda {

// Normalises the last `n` dims of x -> (y, mean, rstd); mean and rstd have x's shape with the last
// `n` dims set to 1. `weight` / `bias` (may be nullptr) have the shape of those dims.
std::tuple<DeviceArray, DeviceArray, DeviceArray> layer_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, int n, double eps);
// -> (dx, dweight (absent without a weight), dbias). The weight and bias gradients are reduced over the
// rows in two deterministic passes (per-block partial sums, then one sum per column), no atomics.
std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> layer_norm_backward(const DeviceArray& g,
                                                                                     const DeviceArray& x,
                                                                                     const DeviceArray* weight,
                                                                                     const DeviceArray& mean,
                                                                                     const DeviceArray& rstd, int n);

// The fused residual add and layer norm: h = x + residual (rounded to x's dtype), then h's layer norm
// -> (y, h, mean, rstd), reading x and residual once. y is written as `y_dtype`: x's dtype, or float16 /
// bfloat16 for float32 x (autocast's activation dtype). x and residual share shape, dtype and device.
std::tuple<DeviceArray, DeviceArray, DeviceArray, DeviceArray> add_layer_norm(const DeviceArray& x,
                                                                             const DeviceArray& residual,
                                                                             const DeviceArray* weight,
                                                                             const DeviceArray* bias, int n,
                                                                             double eps, ScalarType y_dtype);
// Its backward: layer_norm_backward of g (in h's dtype) at h, with `grad_sum` (h's gradient from its
// other uses, or nullptr) added to dx in the same pass -> (dh, dweight (absent without a weight),
// dbias); dh is the gradient of both x and residual.
std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> add_layer_norm_backward(
    const DeviceArray& g, const DeviceArray* grad_sum, const DeviceArray& h, const DeviceArray* weight,
    const DeviceArray& mean, const DeviceArray& rstd, int n);

// RMS norm of the last `n` dims of x: y = x / sqrt(mean(x^2) + eps) * weight -> (y, rstd), rstd shaped as
// layer_norm's statistics; `weight` may be nullptr.
std::tuple<DeviceArray, DeviceArray> rms_norm(const DeviceArray& x, const DeviceArray* weight, int n, double eps);
// -> (dx, dweight (absent without a weight)); dweight reduced over the rows as layer_norm_backward's.
std::tuple<DeviceArray, std::optional<DeviceArray>> rms_norm_backward(const DeviceArray& g, const DeviceArray& x,
                                                                      const DeviceArray* weight,
                                                                      const DeviceArray& rstd, int n);

// Group norm of x (N, C, *) in `groups` groups of C / groups channels -> (y, mean (N, groups), rstd (N, groups)),
// each group normalised with its own statistics, then scaled and shifted per channel by `weight` / `bias`
// (C,) or nullptr. Instance norm is groups = C.
std::tuple<DeviceArray, DeviceArray, DeviceArray> group_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, std::int64_t groups, double eps);
// -> (dx, dweight (absent without a weight), dbias); per-channel sums over (n, c) partials in n order.
std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> group_norm_backward(
    const DeviceArray& g, const DeviceArray& x, const DeviceArray* weight, const DeviceArray& mean,
    const DeviceArray& rstd, std::int64_t groups);

// Batch norm over the channels (dim 1) of x (N, C, *), training statistics over every other dim ->
// (y, mean (C,), rstd (C,)); `weight` / `bias` (C,) or nullptr.
std::tuple<DeviceArray, DeviceArray, DeviceArray> batch_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, double eps);
// -> (dx, dweight (absent without a weight), dbias); per-channel sums in a fixed order, no atomics.
std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> batch_norm_backward(const DeviceArray& g,
                                                                                     const DeviceArray& x,
                                                                                     const DeviceArray* weight,
                                                                                     const DeviceArray& mean,
                                                                                     const DeviceArray& rstd);

}  // namespace adcuda
