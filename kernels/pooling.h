// Max and average pooling on the GPU (kernels/pooling.cu): the CUDA backend's max_pool2d, adaptive_max_pool2d,
// max_pool2d_backward, avg_pool2d(_backward) and adaptive_avg_pool2d(_backward) primitives, with the CPU backend's semantics (adcuda/backends/cpu/pooling.py):
// NCHW, int64 indices h * W + w within each (n, c) plane, a NaN is a window's maximum (its last NaN),
// ties go to the first position. Plain C++: included by the bindings.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// Windows kernel (kh, kw) every stride, from -padding, dilated; out_size (Ho, Wo) given (ceil_mode's
// last windows may run past the input: only positions inside it are read). -> (values, indices).
std::pair<DeviceArray, DeviceArray> max_pool2d(const DeviceArray& x, std::int64_t kh, std::int64_t kw,
                                               std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h,
                                               std::int64_t pad_w, std::int64_t dilation_h, std::int64_t dilation_w,
                                               std::int64_t out_h, std::int64_t out_w);
// PyTorch's adaptive windows: rows floor(i * H / Ho) to ceil((i + 1) * H / Ho). -> (values, indices).
std::pair<DeviceArray, DeviceArray> adaptive_max_pool2d(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w);
// Each gradient of g (float32 or float64) added at its index's position of a (N, C, H, W) array of g's
// dtype (float atomics: several windows may pick one position).
DeviceArray max_pool2d_backward(const DeviceArray& g, const DeviceArray& indices, std::int64_t h, std::int64_t w);

// Average pooling of floating point x over windows kernel (kh, kw) every stride from -padding (at most half
// the kernel), out_size (Ho, Wo) given (ceil_mode's); each window's sum over the input positions it covers,
// divided by divisor_override when it is not 0, else by the window's size clipped to the padded input
// (count_include_pad) or to the input.
DeviceArray avg_pool2d(const DeviceArray& x, std::int64_t kh, std::int64_t kw, std::int64_t stride_h,
                       std::int64_t stride_w, std::int64_t pad_h, std::int64_t pad_w, std::int64_t out_h,
                       std::int64_t out_w, bool count_include_pad, std::int64_t divisor_override);
// Its gradient (N, C, h, w) from the output's, each input position gathering its windows' shares.
DeviceArray avg_pool2d_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, std::int64_t kh,
                                std::int64_t kw, std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h,
                                std::int64_t pad_w, bool count_include_pad, std::int64_t divisor_override);
// The mean over PyTorch's adaptive windows, and its gradient (gather form as well).
DeviceArray adaptive_avg_pool2d(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w);
DeviceArray adaptive_avg_pool2d_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w);

}  // namespace adcuda
