// Pooling's window rules, written once for the CUDA kernels (pooling.cu) and the CPU backend's host
// kernels (host/pooling.cpp): which input positions the window of output (oh, ow) covers (fixed windows
// with padding and dilation; PyTorch's adaptive windows, rows floor(i * H / Ho) to ceil((i + 1) * H / Ho)),
// average pooling's divisor and sum, and max pooling's pick (a larger value or a NaN takes over, starting from
// the window's first position: ties keep the first, a NaN the last).
#pragma once

#include <cstdint>
#include <type_traits>

namespace adcuda::pooling {

// nvcc compiles them for both sides; a plain C++ compiler (the host module) sees ordinary inline functions.
#if defined(__CUDACC__)
#define ADCUDA_POOLING_HD __host__ __device__ __forceinline__
#else
#define ADCUDA_POOLING_HD inline
#endif

struct PoolGeometry {
  std::int64_t planes, h, w, out_h, out_w, kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

struct AvgGeometry {
  std::int64_t planes, h, w, out_h, out_w, kh, kw, stride_h, stride_w, pad_h, pad_w;
  bool count_include_pad;
  std::int64_t divisor_override;  // 0: none
};

// Rows [h0, h1) and columns [w0, w1) of the input (every dilation for max pooling's fixed windows).
struct Window {
  std::int64_t h0, h1, w0, w1;
  std::int64_t divisor;  // average pooling's
};

ADCUDA_POOLING_HD std::int64_t lesser(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
ADCUDA_POOLING_HD std::int64_t greater(std::int64_t a, std::int64_t b) { return a < b ? b : a; }

ADCUDA_POOLING_HD Window adaptive_window(std::int64_t h, std::int64_t w, std::int64_t out_h, std::int64_t out_w,
                                 std::int64_t oh, std::int64_t ow) {
  const std::int64_t h0 = oh * h / out_h, h1 = ((oh + 1) * h + out_h - 1) / out_h;
  const std::int64_t w0 = ow * w / out_w, w1 = ((ow + 1) * w + out_w - 1) / out_w;
  return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
}

// A fixed max pooling window's positions inside the input: its first row and column are the first
// taps (counted in dilations) that are not padding.
ADCUDA_POOLING_HD Window max_window(const PoolGeometry& g, std::int64_t oh, std::int64_t ow) {
  std::int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  const std::int64_t h1 = lesser(h0 + (g.kh - 1) * g.dilation_h + 1, g.h);
  const std::int64_t w1 = lesser(w0 + (g.kw - 1) * g.dilation_w + 1, g.w);
  while (h0 < 0) h0 += g.dilation_h;
  while (w0 < 0) w0 += g.dilation_w;
  return {h0, h1, w0, w1, 0};
}

template <bool kAdaptive>
ADCUDA_POOLING_HD Window avg_window(const AvgGeometry& g, std::int64_t oh, std::int64_t ow) {
  if constexpr (kAdaptive) {
    return adaptive_window(g.h, g.w, g.out_h, g.out_w, oh, ow);
  } else {
    std::int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    std::int64_t h1 = lesser(h0 + g.kh, g.h + g.pad_h), w1 = lesser(w0 + g.kw, g.w + g.pad_w);
    const std::int64_t padded = (h1 - h0) * (w1 - w0);
    h0 = greater(h0, 0);
    w0 = greater(w0, 0);
    h1 = lesser(h1, g.h);
    w1 = lesser(w1, g.w);
    const std::int64_t divisor =
        g.divisor_override != 0 ? g.divisor_override : (g.count_include_pad ? padded : (h1 - h0) * (w1 - w0));
    return {h0, h1, w0, w1, divisor};
  }
}

template <typename Acc>
ADCUDA_POOLING_HD bool is_nan(Acc v) {
  if constexpr (std::is_floating_point_v<Acc>) {
    return v != v;
  } else {
    return false;
  }
}

// The maximum of a window of ``plane`` (rows of width w) every (dh, dw), read as Acc by ``load``, and
// its flat position; ``lowest`` is where the search starts (a window of nothing but it names its first
// position).
template <typename Acc, typename T, typename Load>
ADCUDA_POOLING_HD void window_max(const T* plane, std::int64_t w, const Window& win, std::int64_t dh, std::int64_t dw,
                          Acc lowest, Load load, Acc* value, std::int64_t* index) {
  Acc best = lowest;
  std::int64_t where = win.h0 * w + win.w0;
  for (std::int64_t ih = win.h0; ih < win.h1; ih += dh) {
    for (std::int64_t iw = win.w0; iw < win.w1; iw += dw) {
      const Acc v = load(plane[ih * w + iw]);
      if (v > best || is_nan(v)) {
        best = v;
        where = ih * w + iw;
      }
    }
  }
  *value = best;
  *index = where;
}

// The sum of a window of ``plane`` (rows of width w), read as Acc by ``load``, divided by its divisor.
template <typename Acc, typename T, typename Load>
ADCUDA_POOLING_HD Acc window_mean(const T* plane, std::int64_t w, const Window& win, Load load) {
  Acc sum = Acc(0);
  for (std::int64_t ih = win.h0; ih < win.h1; ++ih) {
    for (std::int64_t iw = win.w0; iw < win.w1; ++iw) sum += load(plane[ih * w + iw]);
  }
  return sum / static_cast<Acc>(win.divisor);
}

#undef ADCUDA_POOLING_HD

}  // namespace adcuda::pooling
