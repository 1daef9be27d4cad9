// Softmax, log-softmax and the fused cross-entropy on the GPU (kernels/softmax_loss.cu): the CUDA
// backend's softmax, softmax_backward, cross_entropy and cross_entropy_backward primitives, with the
// CPU backend's semantics (adcuda/backends/cpu/softmax_loss.py). Inputs must be contiguous; floating point
// dtypes, computed in fp32 (fp64 for fp64). Plain C++: included by the bindings.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// (log-)softmax of `a` along `axis`, in a's dtype.
DeviceArray softmax(const DeviceArray& a, int axis, bool log);
// The gradient w.r.t. the input from the output `y` and its gradient `g` (same shape and dtype).
DeviceArray softmax_backward(const DeviceArray& y, const DeviceArray& g, int axis, bool log);
// Per-row losses (N,) and log-softmax statistics (N, 2) of `logits` (N, C) against int64 class indices
// `target` (N,); rows whose target is `ignore_index` lose 0. Each row's statistics are its shift m and
// log_sum = log(sum(exp(x - m))), float32 (float64 for float64 logits): all the backward needs besides
// the logits, so no (N, C) log-probabilities are written.
std::pair<DeviceArray, DeviceArray> cross_entropy(const DeviceArray& logits, const DeviceArray& target,
                                                  std::int64_t ignore_index, double label_smoothing);
// The gradient w.r.t. the logits, exp((logits - m) - log_sum) minus the smoothed one-hot target, times
// each row's loss gradient `g_rows` (N,) (0 for ignored rows); `stats` as cross_entropy returned them.
DeviceArray cross_entropy_backward(const DeviceArray& logits, const DeviceArray& stats, const DeviceArray& target,
                                   const DeviceArray& g_rows, std::int64_t ignore_index, double label_smoothing);

}  // namespace adcuda
