// Softmax, log-softmax and the fused cross-entropy on the GPU (kernels/softmax_loss.cu): the CUDA
// backend's softmax, softmax_backward, classifier_loss and classifier_loss_backward primitives, with the
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
// The fused classifier. Per-row cross-entropy losses (N,) and statistics (N, 2) (each row's shift and
// log of the sum of exponentials) of `logits` (N, C, any floating dtype, read once) against int64
// class indices `target` (N,), with optional class weights (C,) and label smoothing; rows whose target
// is `ignore_index` lose 0. Losses, statistics and weights are float32 (float64 for float64 logits):
// the statistics are all the backward needs besides the logits, so no (N, C) log-probabilities (nor a
// float32 copy of half logits) are written.
std::pair<DeviceArray, DeviceArray> classifier_loss(const DeviceArray& logits, const DeviceArray& target,
                                                    const DeviceArray* weight, std::int64_t ignore_index,
                                                    double label_smoothing);
// The gradient w.r.t. the logits, in their dtype, from one read of them: the softmax (from `stats`)
// times (1 - ls) w[t] + ls / C * sum(w), minus (1 - ls) w[t] at the target and ls / C * w everywhere,
// times each row's loss gradient `g_rows` (N,) (0 for ignored rows).
DeviceArray classifier_loss_backward(const DeviceArray& logits, const DeviceArray& stats, const DeviceArray& target,
                                     const DeviceArray* weight, const DeviceArray& g_rows, std::int64_t ignore_index,
                                     double label_smoothing);

}  // namespace adcuda
