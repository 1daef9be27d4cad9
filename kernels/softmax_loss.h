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
// Per-row losses (N,) and log-probabilities (N, C) of `logits` (N, C) against int64 class indices
// `target` (N,); rows whose target is `ignore_index` lose 0.
std::pair<DeviceArray, DeviceArray> cross_entropy(const DeviceArray& logits, const DeviceArray& target,
                                                  std::int64_t ignore_index, double label_smoothing);
// The gradient w.r.t. the logits from the saved log-probabilities and the per-row loss gradients.
DeviceArray cross_entropy_backward(const DeviceArray& logp, const DeviceArray& target, const DeviceArray& g_rows,
                                   std::int64_t ignore_index, double label_smoothing);

}  // namespace adcuda
