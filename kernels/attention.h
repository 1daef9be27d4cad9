// Scaled dot-product attention on the GPU (kernels/attention.cu): the CUDA backend's attention and
// attention_backward primitives, with the CPU backend's semantics. Plain C++: included by the
// bindings.
//
// q (..., L, E), k (..., S, E), v (..., S, Ev) with broadcast batch dims, rows contiguous (last stride
// 1); `mask` (may be nullptr) broadcasts to (batch..., L, S) and is bool (True = may attend) or of q's
// dtype (added to the scores). Results have the full broadcast batch shape.
//
// Dropout (p > 0) drops each probability with probability p and scales the rest by 1 / (1 - p); the
// mask comes from the Philox stream keyed by (seed, offset) in attention_dropout.cuh's counter layout,
// which the CPU backend reproduces exactly, and the backward draws it again from the same draw.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

struct DropoutDraw {
  double p = 0.0;  // 0 <= p <= 1
  std::uint64_t seed = 0, offset = 0;
};

// -> (out (batch..., L, Ev) in q's dtype, lse (batch..., L) float32 (float64 for float64)): the
// rows' logsumexp of the scores, -inf for a row that may attend to nothing (its output is 0).
std::pair<DeviceArray, DeviceArray> attention(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v,
                                              const DeviceArray* mask, bool is_causal, double scale,
                                              const DropoutDraw& dropout);
// -> (dq, dk, dv), recomputing the probabilities from q, k and the saved lse.
std::tuple<DeviceArray, DeviceArray, DeviceArray> attention_backward(const DeviceArray& g, const DeviceArray& q,
                                                                     const DeviceArray& k, const DeviceArray& v,
                                                                     const DeviceArray& out, const DeviceArray& lse,
                                                                     const DeviceArray* mask, bool is_causal,
                                                                     double scale, const DropoutDraw& dropout);
// The bool keep-mask (batch..., L, S) of attention's dropout with `dropout` (all true for p = 0), for
// backward rules that need it as an array (double backward through dropout). device -1: the current one.
DeviceArray attention_dropout_mask(const Dims& shape, const DropoutDraw& dropout, int device);

// Which kernels attention(q, k, v, ...) runs for these operands: "tensor cores" (attention_flash.cuh)
// or "cuda cores" (attention_simt.cuh). For tests and benchmark reports.
std::string attention_kernel_path(const DeviceArray& q, const DeviceArray& v);

}  // namespace adcuda
