// Nearest and bilinear interpolation and padding (resample.h). All are memory-bound gathers: one thread per
// output element, consecutive threads writing consecutive elements and reading neighbouring ones, with
// 32-bit index math (coordinates by FastDivmod; the host splits work of 2^31 elements or more along the
// planes). The backwards are the forwards' transposes in gather form: one thread per input element walks
// the output positions that read it (found from the forward's own source rule, so both agree to the bit)
// and sums their gradients in a fixed order, without atomics, so every run gives the same bits.
//
// Copies (nearest, pad) are instantiated per element size, the arithmetic per floating dtype: about twenty
// small kernels in all.
#include "resample.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "elementwise_loops.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using index_t = std::uint32_t;

__device__ __forceinline__ index_t first_thread() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ index_t thread_stride() { return gridDim.x * blockDim.x; }

// Source positions are computed without contraction into FMAs, as the CPU backend computes them in NumPy:
// a fused product would move some positions across a rounding boundary and pick another input pixel.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// The first output position o in [0, out) whose source position is at least t (out when none). Sources
// never decrease with o, so an estimate from the inverse map, corrected by stepping, is exact.
template <typename Source>
__device__ __forceinline__ index_t first_reaching(index_t t, float estimate, index_t out, Source source) {
  if (t == 0) return 0;
  const float rounded = ceilf(estimate);
  index_t o = rounded > 0.f ? (rounded < static_cast<float>(out) ? static_cast<index_t>(rounded) : out) : 0;
  while (o > 0 && source(o - 1) >= t) --o;
  while (o < out && source(o) < t) ++o;
  return o;
}

// Output position o reads the input position floor(o * scale) ('nearest'; the product in float, or in
// double for float64 data, `wide`) or floor((o + 0.5) * scale) with the product in double ('nearest-exact'),
// each rounded to float before the floor, as PyTorch computes them; the host rounds the scale to float
// unless `wide`.
struct NearestRule {
  double scale;
  bool exact, wide;
};

__device__ __forceinline__ index_t nearest_source(index_t o, const NearestRule& rule, index_t n) {
  float src;
  if (rule.exact) {
    src = static_cast<float>(mul_rn(static_cast<double>(o) + 0.5, rule.scale));
  } else if (rule.wide) {
    src = static_cast<float>(mul_rn(static_cast<double>(o), rule.scale));
  } else {
    src = mul_rn(static_cast<float>(o), static_cast<float>(rule.scale));
  }
  return min(static_cast<index_t>(floorf(src)), n - 1);
}

__device__ __forceinline__ float nearest_estimate(index_t t, const NearestRule& rule) {
  return static_cast<float>(t) / static_cast<float>(rule.scale) - (rule.exact ? 0.5f : 0.f);
}

// Output position o of linear interpolation: inputs i0 and i1 (i1 = i0 at the last input) weighted l0, l1.
template <typename Acc>
struct LinearTap {
  index_t i0, i1;
  Acc l0, l1;
};

template <typename Acc>
__device__ __forceinline__ LinearTap<Acc> linear_tap(index_t o, Acc scale, bool align_corners, index_t n) {
  Acc src;
  if (align_corners) {
    src = mul_rn(scale, static_cast<Acc>(o));
  } else {
    src = add_rn(mul_rn(scale, add_rn(static_cast<Acc>(o), Acc(0.5))), Acc(-0.5));
    src = src < Acc(0) ? Acc(0) : src;
  }
  const index_t i0 = min(static_cast<index_t>(src), n - 1);  // src >= 0: truncation is floor
  const Acc l1 = min(src - static_cast<Acc>(i0), Acc(1));
  return {i0, i0 + (i0 + 1 < n ? 1u : 0u), Acc(1) - l1, l1};
}

template <typename Acc>
__device__ __forceinline__ float linear_estimate(index_t t, Acc scale, bool align_corners) {
  const float s = static_cast<float>(scale);
  return align_corners ? static_cast<float>(t) / s : (static_cast<float>(t) + 0.5f) / s - 0.5f;
}

// Input position i's weight in output position o's value.
template <typename Acc>
__device__ __forceinline__ Acc linear_weight(const LinearTap<Acc>& tap, index_t i) {
  return (tap.i0 == i ? tap.l0 : Acc(0)) + (tap.i1 == i ? tap.l1 : Acc(0));
}

// Planes of (h, w) resized to (out_h, out_w); the dividers split output (forward) or input (backward)
// element indices into (plane, row, column).
struct Resize {
  index_t h, w, out_h, out_w;
  FastDivmod row_length, rows;
};

template <typename Bits>
__global__ void nearest_kernel(const Bits* x, Bits* y, index_t total, const Resize g, const NearestRule rule_h,
                               const NearestRule rule_w) {
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    const index_t row = g.row_length.divide(i), ow = i - row * g.out_w;
    const index_t plane = g.rows.divide(row), oh = row - plane * g.out_h;
    const index_t ih = nearest_source(oh, rule_h, g.h), iw = nearest_source(ow, rule_w, g.w);
    y[i] = x[(plane * g.h + ih) * g.w + iw];
  }
}

template <typename T>
__global__ void nearest_backward_kernel(const T* grad, T* dx, index_t total, const Resize g, const NearestRule rule_h,
                                        const NearestRule rule_w) {
  using Acc = compute_t<T>;
  const auto source_h = [&](index_t o) { return nearest_source(o, rule_h, g.h); };
  const auto source_w = [&](index_t o) { return nearest_source(o, rule_w, g.w); };
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    const index_t row = g.row_length.divide(i), iw = i - row * g.w;
    const index_t plane = g.rows.divide(row), ih = row - plane * g.h;
    const index_t oh0 = first_reaching(ih, nearest_estimate(ih, rule_h), g.out_h, source_h);
    const index_t oh1 = first_reaching(ih + 1, nearest_estimate(ih + 1, rule_h), g.out_h, source_h);
    const index_t ow0 = first_reaching(iw, nearest_estimate(iw, rule_w), g.out_w, source_w);
    const index_t ow1 = first_reaching(iw + 1, nearest_estimate(iw + 1, rule_w), g.out_w, source_w);
    const T* gp = grad + plane * g.out_h * g.out_w;
    Acc sum = Acc(0);
    for (index_t oh = oh0; oh < oh1; ++oh) {
      for (index_t ow = ow0; ow < ow1; ++ow) sum += to_compute(gp[oh * g.out_w + ow]);
    }
    dx[i] = convert<T>(sum);
  }
}

template <typename T>
__global__ void bilinear_kernel(const T* x, T* y, index_t total, const Resize g, compute_t<T> scale_h,
                                compute_t<T> scale_w, bool align_corners) {
  using Acc = compute_t<T>;
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    const index_t row = g.row_length.divide(i), ow = i - row * g.out_w;
    const index_t plane = g.rows.divide(row), oh = row - plane * g.out_h;
    const LinearTap<Acc> th = linear_tap(oh, scale_h, align_corners, g.h);
    const LinearTap<Acc> tw = linear_tap(ow, scale_w, align_corners, g.w);
    const T* top = x + (plane * g.h + th.i0) * g.w;
    const T* bottom = x + (plane * g.h + th.i1) * g.w;
    const Acc upper = tw.l0 * to_compute(top[tw.i0]) + tw.l1 * to_compute(top[tw.i1]);
    const Acc lower = tw.l0 * to_compute(bottom[tw.i0]) + tw.l1 * to_compute(bottom[tw.i1]);
    y[i] = convert<T>(th.l0 * upper + th.l1 * lower);
  }
}

template <typename T>
__global__ void bilinear_backward_kernel(const T* grad, T* dx, index_t total, const Resize g, compute_t<T> scale_h,
                                         compute_t<T> scale_w, bool align_corners) {
  using Acc = compute_t<T>;
  const auto source_h = [&](index_t o) { return linear_tap(o, scale_h, align_corners, g.h).i0; };
  const auto source_w = [&](index_t o) { return linear_tap(o, scale_w, align_corners, g.w).i0; };
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    const index_t row = g.row_length.divide(i), iw = i - row * g.w;
    const index_t plane = g.rows.divide(row), ih = row - plane * g.h;
    // the outputs whose first tap is i - 1 or i are the ones that read i
    const index_t oh0 =
        ih == 0 ? 0 : first_reaching(ih - 1, linear_estimate(ih - 1, scale_h, align_corners), g.out_h, source_h);
    const index_t oh1 = first_reaching(ih + 1, linear_estimate(ih + 1, scale_h, align_corners), g.out_h, source_h);
    const index_t ow0 =
        iw == 0 ? 0 : first_reaching(iw - 1, linear_estimate(iw - 1, scale_w, align_corners), g.out_w, source_w);
    const index_t ow1 = first_reaching(iw + 1, linear_estimate(iw + 1, scale_w, align_corners), g.out_w, source_w);
    const T* gp = grad + plane * g.out_h * g.out_w;
    Acc sum = Acc(0);
    for (index_t oh = oh0; oh < oh1; ++oh) {
      const Acc weight_h = linear_weight(linear_tap(oh, scale_h, align_corners, g.h), ih);
      Acc row_sum = Acc(0);
      for (index_t ow = ow0; ow < ow1; ++ow) {
        row_sum += linear_weight(linear_tap(ow, scale_w, align_corners, g.w), iw) * to_compute(gp[oh * g.out_w + ow]);
      }
      sum += weight_h * row_sum;
    }
    dx[i] = convert<T>(sum);
  }
}

// ---------------------------------------------------------------------------------------------------------
// padding: arrays viewed as (planes, D, H, W), the last three dims padded (unpadded ones have zero pads)
struct PadGeometry {
  int in[3], out[3], before[3];
  int period[3];  // circular: the size left after cropping (negative pads), which the padding wraps around
  FastDivmod divide[3];  // by out[d] (forward) or in[d] (backward)
  PadMode mode;
};

// The input position output position o reads along a dim of n elements, or -1 for the constant.
__device__ __forceinline__ int pad_source(int o, int before, int n, int period, PadMode mode) {
  const int j = o - before;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case PadMode::Reflect: return j < 0 ? -j : 2 * (n - 1) - j;
    case PadMode::Replicate: return j < 0 ? 0 : n - 1;
    case PadMode::Circular: return j < 0 ? j + period : j - period;
    default: return -1;
  }
}

template <typename Bits>
__global__ void pad_kernel(const Bits* x, Bits* y, index_t total, const PadGeometry g, Bits value) {
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    index_t rest = i;
    int source[3];
    bool inside = true;
#pragma unroll
    for (int d = 2; d >= 0; --d) {
      const index_t quotient = g.divide[d].divide(rest);
      source[d] = pad_source(static_cast<int>(rest - quotient * g.out[d]), g.before[d], g.in[d], g.period[d], g.mode);
      inside = inside && source[d] >= 0;
      rest = quotient;
    }
    y[i] = inside ? x[((rest * g.in[0] + source[0]) * g.in[1] + source[1]) * g.in[2] + source[2]] : value;
  }
}

// The output positions along one dim that read input position i: up to three runs [start, start + count).
struct Runs {
  int start[3], count[3];
};

__device__ __forceinline__ Runs pad_readers(int i, int before, int n, int out, int period, PadMode mode) {
  Runs runs{{0, 0, 0}, {0, 0, 0}};
  int k = 0;
  // j: input-relative coordinates [lo, hi), the output's being j + before
  const auto add = [&](int lo, int hi) {
    lo = max(lo + before, 0);
    hi = min(hi + before, out);
    if (lo < hi) {
      runs.start[k] = lo;
      runs.count[k] = hi - lo;
      ++k;
    }
  };
  switch (mode) {
    case PadMode::Reflect:
      add(i, i + 1);
      if (i > 0) add(-i, -i + 1);
      if (i < n - 1) add(2 * (n - 1) - i, 2 * (n - 1) - i + 1);
      break;
    case PadMode::Replicate: add(i == 0 ? -before : i, i == n - 1 ? out - before : i + 1); break;
    case PadMode::Circular:
      if (i < period) add(i - period, i - period + 1);
      add(i, i + 1);
      if (i + period >= n) add(i + period, i + period + 1);
      break;
    default: add(i, i + 1);
  }
  return runs;
}

template <typename T>
__global__ void pad_backward_kernel(const T* grad, T* dx, index_t total, const PadGeometry g) {
  using Acc = compute_t<T>;
  for (index_t i = first_thread(); i < total; i += thread_stride()) {
    index_t rest = i;
    int coordinate[3];
#pragma unroll
    for (int d = 2; d >= 0; --d) {
      const index_t quotient = g.divide[d].divide(rest);
      coordinate[d] = static_cast<int>(rest - quotient * g.in[d]);
      rest = quotient;
    }
    const Runs rd = pad_readers(coordinate[0], g.before[0], g.in[0], g.out[0], g.period[0], g.mode);
    const Runs rh = pad_readers(coordinate[1], g.before[1], g.in[1], g.out[1], g.period[1], g.mode);
    const Runs rw = pad_readers(coordinate[2], g.before[2], g.in[2], g.out[2], g.period[2], g.mode);
    const T* gp = grad + rest * g.out[0] * g.out[1] * g.out[2];
    Acc sum = Acc(0);
    // the runs unrolled, so that they stay in registers
#pragma unroll
    for (int a = 0; a < 3; ++a) {
      for (int od = rd.start[a]; od < rd.start[a] + rd.count[a]; ++od) {
#pragma unroll
        for (int b = 0; b < 3; ++b) {
          for (int oh = rh.start[b]; oh < rh.start[b] + rh.count[b]; ++oh) {
            const T* row = gp + (static_cast<index_t>(od) * g.out[1] + oh) * g.out[2];
#pragma unroll
            for (int c = 0; c < 3; ++c) {
              for (int ow = rw.start[c]; ow < rw.start[c] + rw.count[c]; ++ow) sum += to_compute(row[ow]);
            }
          }
        }
      }
    }
    dx[i] = convert<T>(sum);
  }
}

// ---------------------------------------------------------------------------------------------------------
// host side

// Calls launch(first_plane, planes) over chunks of the planes small enough for 32-bit indexing.
template <typename Launch>
void for_each_plane_chunk(std::int64_t planes, std::int64_t per_plane, Launch&& launch) {
  const std::int64_t chunk = std::max<std::int64_t>(1, kInt32Limit / std::max<std::int64_t>(per_plane, 1));
  for (std::int64_t first = 0; first < planes; first += chunk) launch(first, std::min(chunk, planes - first));
}

void check_planes(const char* op, const DeviceArray& a, const char* what) {
  require(a.ndim() == 4, op, std::string("expected a 4-d ") + what + " (N, C, H, W), got shape " + format_dims(a.shape()));
  require(a.is_contiguous(), op, std::string("the ") + what + " must be contiguous");
}

// The geometry of planes of `in` (h, w) and `out` sizes; `per_out` picks which of them the thread
// index runs over.
Resize resize_geometry(const char* op, std::int64_t h, std::int64_t w, std::int64_t out_h, std::int64_t out_w,
                       bool per_out) {
  require(h >= 0 && w >= 0 && out_h >= 0 && out_w >= 0, op, "sizes must be non-negative");
  require(h * w < kInt32Limit && out_h * out_w < kInt32Limit, op,
          "planes of 2^31 elements or more are not supported (input " + std::to_string(h) + "x" + std::to_string(w) +
              ", output " + std::to_string(out_h) + "x" + std::to_string(out_w) + ")");
  Resize g{static_cast<index_t>(h), static_cast<index_t>(w), static_cast<index_t>(out_h), static_cast<index_t>(out_w),
           FastDivmod(static_cast<std::uint32_t>(per_out ? out_w : w)),
           FastDivmod(static_cast<std::uint32_t>(per_out ? out_h : h))};
  return g;
}

// PyTorch's precision for the nearest source positions: float64 data in double, the rest in float.
NearestRule nearest_rule(double scale, bool exact, ScalarType dtype) {
  const bool wide = dtype == ScalarType::Float64;
  return {wide ? scale : static_cast<double>(static_cast<float>(scale)), exact, wide};
}

// Runs kernel(src + first * src_plane, dst + first * dst_plane, elements, geometry, args...) over chunks of
// the planes of `dst` (the array a thread per element covers).
template <typename Src, typename Dst, typename Kernel, typename... Args>
void launch_planes(const DeviceArray& src, const DeviceArray& dst, std::int64_t planes, std::int64_t src_plane,
                   std::int64_t dst_plane, cudaStream_t stream, Kernel kernel, const Args&... args) {
  for_each_plane_chunk(planes, std::max(src_plane, dst_plane), [&](std::int64_t first, std::int64_t count) {
    const std::int64_t elements = count * dst_plane;
    kernel<<<grid_size(elements), kBlockSize, 0, stream>>>(src.data<Src>() + first * src_plane,
                                                           dst.data<Dst>() + first * dst_plane,
                                                           static_cast<index_t>(elements), args...);
    ADCUDA_CHECK_LAUNCH();
  });
}

}  // namespace

DeviceArray interpolate_nearest(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w, double scale_h,
                                double scale_w, bool exact) {
  const char* op = "interpolate_nearest";
  check_planes(op, x, "input");
  const Dims& s = x.shape();
  const Resize g = resize_geometry(op, s[2], s[3], out_h, out_w, true);
  require(s[2] * s[3] > 0 || s[0] * s[1] * out_h * out_w == 0, op, "cannot resize empty planes " + format_dims(s));
  DeviceArray y = DeviceArray::empty({s[0], s[1], out_h, out_w}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  KernelLaunch launch(y, x);
  dispatch_bits(itemsize(x.dtype()), [&](auto tag) {
    using Bits = typename decltype(tag)::type;
    launch_planes<Bits, Bits>(x, y, s[0] * s[1], s[2] * s[3], out_h * out_w, launch.stream(), nearest_kernel<Bits>, g,
                              nearest_rule(scale_h, exact, x.dtype()), nearest_rule(scale_w, exact, x.dtype()));
  });
  return y;
}

DeviceArray interpolate_nearest_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, double scale_h,
                                         double scale_w, bool exact) {
  const char* op = "interpolate_nearest_backward";
  check_planes(op, grad, "gradient");
  const Dims& s = grad.shape();
  const Resize g = resize_geometry(op, h, w, s[2], s[3], false);
  DeviceArray dx = DeviceArray::empty({s[0], s[1], h, w}, grad.dtype(), grad.device());
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    KernelLaunch launch(dx, grad);
    launch_planes<T, T>(grad, dx, s[0] * s[1], s[2] * s[3], h * w, launch.stream(), nearest_backward_kernel<T>, g,
                        nearest_rule(scale_h, exact, grad.dtype()), nearest_rule(scale_w, exact, grad.dtype()));
  });
  return dx;
}

DeviceArray interpolate_bilinear(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w, double scale_h,
                                 double scale_w, bool align_corners) {
  const char* op = "interpolate_bilinear";
  check_planes(op, x, "input");
  const Dims& s = x.shape();
  const Resize g = resize_geometry(op, s[2], s[3], out_h, out_w, true);
  require(s[2] * s[3] > 0 || s[0] * s[1] * out_h * out_w == 0, op, "cannot resize empty planes " + format_dims(s));
  DeviceArray y = DeviceArray::empty({s[0], s[1], out_h, out_w}, x.dtype(), x.device());
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    if (y.numel() == 0) return;
    KernelLaunch launch(y, x);
    launch_planes<T, T>(x, y, s[0] * s[1], s[2] * s[3], out_h * out_w, launch.stream(), bilinear_kernel<T>, g,
                        static_cast<Acc>(scale_h), static_cast<Acc>(scale_w), align_corners);
  });
  return y;
}

DeviceArray interpolate_bilinear_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, double scale_h,
                                          double scale_w, bool align_corners) {
  const char* op = "interpolate_bilinear_backward";
  check_planes(op, grad, "gradient");
  const Dims& s = grad.shape();
  const Resize g = resize_geometry(op, h, w, s[2], s[3], false);
  DeviceArray dx = DeviceArray::empty({s[0], s[1], h, w}, grad.dtype(), grad.device());
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    if (dx.numel() == 0) return;
    KernelLaunch launch(dx, grad);
    launch_planes<T, T>(grad, dx, s[0] * s[1], s[2] * s[3], h * w, launch.stream(), bilinear_backward_kernel<T>, g,
                        static_cast<Acc>(scale_h), static_cast<Acc>(scale_w), align_corners);
  });
  return dx;
}

PadMode pad_mode(const std::string& name) {
  if (name == "constant") return PadMode::Constant;
  if (name == "reflect") return PadMode::Reflect;
  if (name == "replicate") return PadMode::Replicate;
  if (name == "circular") return PadMode::Circular;
  throw std::invalid_argument("pad: mode must be constant, reflect, replicate or circular, got '" + name + "'");
}

namespace {

constexpr std::int64_t kPadLimit = std::int64_t(1) << 30;  // sizes and pads: signed int math stays in range

// (planes, in[3], out[3], before[3]) of padding the last pads.size() / 2 dims of `shape`.
struct PadPlan {
  std::int64_t planes;
  PadGeometry geometry;
  Dims out_shape;
};

PadPlan pad_plan(const char* op, const Dims& shape, const std::vector<std::int64_t>& pads, PadMode mode,
                 bool per_out) {
  const auto k = static_cast<std::int64_t>(pads.size() / 2);
  require(pads.size() % 2 == 0 && k <= 3 && k <= static_cast<std::int64_t>(shape.size()), op,
          "expected (before, after) pairs for at most 3 of the last dims of shape " + format_dims(shape) + ", got " +
              std::to_string(pads.size()) + " values");
  PadPlan plan{1, {}, shape};
  const std::int64_t lead = static_cast<std::int64_t>(shape.size()) - k;
  for (std::int64_t d = 0; d < lead; ++d) plan.planes *= shape[d];
  for (int d = 0; d < 3; ++d) {
    const std::int64_t p = d - (3 - k);  // which pad pair, negative for the leading size-1 dims
    const std::int64_t n = p < 0 ? 1 : shape[lead + p];
    const std::int64_t before = p < 0 ? 0 : pads[2 * p], after = p < 0 ? 0 : pads[2 * p + 1];
    const std::int64_t out = n + before + after;
    require(out >= 0, op, "padding leaves a negative size for shape " + format_dims(shape));
    require(n < kPadLimit && out < kPadLimit && std::abs(before) < kPadLimit && std::abs(after) < kPadLimit, op,
            "sizes and pads of 2^30 or more are not supported, shape " + format_dims(shape));
    if (p >= 0) plan.out_shape[lead + p] = out;
    if (mode == PadMode::Reflect) {
      require(before < n && after < n, op,
              "reflect padding must be less than the dim's size, got (" + std::to_string(before) + ", " +
                  std::to_string(after) + ") for size " + std::to_string(n) + " of shape " + format_dims(shape));
    }
    const std::int64_t period = n - std::max<std::int64_t>(-before, 0) - std::max<std::int64_t>(-after, 0);
    if (mode == PadMode::Circular) {
      require(before <= period && after <= period, op,
              "circular padding must be at most the dim's size left after cropping, got (" + std::to_string(before) +
                  ", " + std::to_string(after) + ") for size " + std::to_string(n) + " of shape " + format_dims(shape));
    }
    if (mode != PadMode::Constant && (before > 0 || after > 0)) {
      require(n > 0, op, "cannot pad an empty dim in this mode, shape " + format_dims(shape));
    }
    auto& g = plan.geometry;
    g.in[d] = static_cast<int>(n);
    g.out[d] = static_cast<int>(out);
    g.before[d] = static_cast<int>(before);
    g.period[d] = static_cast<int>(std::max<std::int64_t>(period, 0));
    g.divide[d] = FastDivmod(static_cast<std::uint32_t>(per_out ? out : n));
  }
  plan.geometry.mode = mode;
  const auto& g = plan.geometry;
  require(std::int64_t(g.in[0]) * g.in[1] * g.in[2] < kInt32Limit && std::int64_t(g.out[0]) * g.out[1] * g.out[2] < kInt32Limit,
          op, "padded blocks of 2^31 elements or more are not supported, shape " + format_dims(shape));
  return plan;
}

std::int64_t block_of(const int (&sizes)[3]) { return std::int64_t(sizes[0]) * sizes[1] * sizes[2]; }

}  // namespace

DeviceArray pad(const DeviceArray& x, const std::vector<std::int64_t>& pads, PadMode mode, double value) {
  const char* op = "pad";
  require(x.is_contiguous(), op, "the input must be contiguous");
  const PadPlan plan = pad_plan(op, x.shape(), pads, mode, true);
  DeviceArray y = DeviceArray::empty(plan.out_shape, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  // the constant in x's dtype, as the bits the copy kernel of its size writes (little-endian: the low bytes)
  std::uint64_t pattern = 0;
  dispatch_type(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T typed = convert<T>(value);
    std::memcpy(&pattern, &typed, sizeof(T));
  });
  KernelLaunch launch(y, x);
  dispatch_bits(itemsize(x.dtype()), [&](auto tag) {
    using Bits = typename decltype(tag)::type;
    Bits bits{};
    std::memcpy(&bits, &pattern, sizeof(Bits));
    launch_planes<Bits, Bits>(x, y, plan.planes, block_of(plan.geometry.in), block_of(plan.geometry.out),
                              launch.stream(), pad_kernel<Bits>, plan.geometry, bits);
  });
  return y;
}

DeviceArray pad_backward(const DeviceArray& grad, const Dims& input_shape, const std::vector<std::int64_t>& pads,
                         PadMode mode) {
  const char* op = "pad_backward";
  require(grad.is_contiguous(), op, "the gradient must be contiguous");
  const PadPlan plan = pad_plan(op, input_shape, pads, mode, false);
  require(plan.out_shape == grad.shape(), op,
          "gradient of shape " + format_dims(grad.shape()) + " does not fit input " + format_dims(input_shape) +
              " padded to " + format_dims(plan.out_shape));
  DeviceArray dx = DeviceArray::empty(input_shape, grad.dtype(), grad.device());
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    KernelLaunch launch(dx, grad);
    launch_planes<T, T>(grad, dx, plan.planes, block_of(plan.geometry.out), block_of(plan.geometry.in),
                        launch.stream(), pad_backward_kernel<T>, plan.geometry);
  });
  return dx;
}

}  // namespace adcuda
