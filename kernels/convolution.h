// 2-d convolution on the GPU (kernels/convolution.cu): the CUDA backend's conv2d, conv2d_backward_input
// and conv2d_backward_weight primitives, with the CPU backend's semantics (adcuda/backends/cpu/
// convolution.py): NCHW, zero padding on both sides, groups, fp32 accumulation (fp64 for float64).
// Every operand contiguous and of one floating dtype; the Python wrappers check shapes. Plain C++:
// included by the bindings.
#pragma once

#include <cstdint>

#include "runtime/device_array.h"

namespace adcuda {

// The geometry every convolution primitive shares (input N, C, H, W; weight O, C/groups, kh, kw;
// output Ho, Wo).
struct ConvGeometry {
  std::int64_t n, c, h, w, o, kh, kw, ho, wo, groups;
  std::int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

// x (N, C, H, W) cross-correlated with weight (O, C/groups, kh, kw) -> (N, O, Ho, Wo).
DeviceArray conv2d(const DeviceArray& x, const DeviceArray& weight, const ConvGeometry& geometry);
// The input's gradient (N, C, H, W) from g (N, O, Ho, Wo).
DeviceArray conv2d_backward_input(const DeviceArray& g, const DeviceArray& weight, const ConvGeometry& geometry);
// The weight's gradient (O, C/groups, kh, kw) from g and x: split over N*Ho*Wo into fp32 partial sums
// that a second kernel adds in a fixed order (deterministic, no atomics).
DeviceArray conv2d_backward_weight(const DeviceArray& g, const DeviceArray& x, const ConvGeometry& geometry);

}  // namespace adcuda
