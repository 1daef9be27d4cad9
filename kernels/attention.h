// Scaled dot-product attention on the GPU (kernels/attention.cu): the CUDA backend's attention and
// attention_backward primitives, with the CPU backend's semantics. Plain C++: included by the
// bindings.
//
// q (..., L, E), k (..., S, E), v (..., S, Ev) with broadcast batch dims, rows contiguous (last stride
// 1); `mask` (may be nullptr) broadcasts to (batch..., L, S) and is bool (True = may attend) or of q's
// dtype (added to the scores). Results have the full broadcast batch shape.
#pragma once

#include <tuple>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// -> (out (batch..., L, Ev) in q's dtype, lse (batch..., L) float32 (float64 for float64)): the
// rows' logsumexp of the scores, -inf for a row that may attend to nothing (its output is 0).
std::pair<DeviceArray, DeviceArray> attention(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v,
                                              const DeviceArray* mask, bool is_causal, double scale);
// -> (dq, dk, dv), recomputing the probabilities from q, k and the saved lse.
std::tuple<DeviceArray, DeviceArray, DeviceArray> attention_backward(const DeviceArray& g, const DeviceArray& q,
                                                                     const DeviceArray& k, const DeviceArray& v,
                                                                     const DeviceArray& out, const DeviceArray& lse,
                                                                     const DeviceArray* mask, bool is_causal,
                                                                     double scale);

}  // namespace adcuda
