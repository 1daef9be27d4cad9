// Resampling on the GPU (kernels/resample.cu): the CUDA backend's interpolate_nearest, interpolate_bilinear,
// pad and their backwards, with the CPU backend's semantics (adcuda/backends/cpu/resample.py). Every output
// element reads the input positions a rule picks; every backward is the transpose in gather form (one
// thread per input element summing the output gradients that read it, in a fixed order: no atomics, the
// same bits on every run). Plain C++: included by the bindings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

// x (N, C, H, W) of any dtype resized to (out_h, out_w): output (oh, ow) copies input
// (min(floor(oh * scale_h), H - 1), ...) ('nearest'), or with floor((o + 0.5) * scale) ('nearest-exact',
// `exact`), as PyTorch's CPU kernels compute them: the scales (source steps) and the products in float
// (float64 data: in double), the exact products in double, each rounded to float before the floor.
DeviceArray interpolate_nearest(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w, double scale_h,
                                double scale_w, bool exact);
// Its gradient (N, C, h, w) from the output's, floating point.
DeviceArray interpolate_nearest_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, double scale_h,
                                         double scale_w, bool exact);

// Bilinear interpolation of floating point x (N, C, H, W) to (out_h, out_w), PyTorch's source positions
// (scale * o with align_corners, else max(scale * (o + 0.5) - 0.5, 0)) in the compute type (float, double
// for double), and its gradient.
DeviceArray interpolate_bilinear(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w, double scale_h,
                                 double scale_w, bool align_corners);
DeviceArray interpolate_bilinear_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, double scale_h,
                                          double scale_w, bool align_corners);

enum class PadMode : int { Constant = 0, Reflect = 1, Replicate = 2, Circular = 3 };
// "constant", "reflect", "replicate" or "circular"; std::invalid_argument for anything else.
PadMode pad_mode(const std::string& name);

// x (any dtype) with its last k = pads.size() / 2 <= 3 dims padded by (before, after) pairs, `pads` holding
// them for those dims in order (negative amounts crop). Outside the input: `value` (Constant), the mirror
// image without the edge repeated (Reflect: pads below the dim's size), the edge (Replicate), or the other
// end (Circular: pads at most the size).
DeviceArray pad(const DeviceArray& x, const std::vector<std::int64_t>& pads, PadMode mode, double value);
// Its gradient for an input of `input_shape` from the output's (floating point): each input element sums
// every output gradient that read it.
DeviceArray pad_backward(const DeviceArray& grad, const Dims& input_shape, const std::vector<std::int64_t>& pads,
                         PadMode mode);

}  // namespace adcuda
