// Max pooling: one thread per output element (memory-bound; each window is read once) and an atomic
// scatter of the gradients back to the positions the forward picked. Average pooling (fixed and adaptive
// windows): one thread per output element summing its window in fp32 (fp64), and a backward in gather
// form, one thread per input element adding the gradients of the windows that cover it (no atomics: the
// same result on every run). See pooling.h.
#include "pooling.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cuda/std/limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "elementwise_loops.cuh"
#include "pooling_windows.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using pooling::AvgGeometry;
using pooling::PoolGeometry;
using pooling::Window;

template <typename Acc>
__device__ __forceinline__ Acc lowest() {
  if constexpr (std::is_floating_point_v<Acc>) {
    return -cuda::std::numeric_limits<Acc>::infinity();
  } else {
    return cuda::std::numeric_limits<Acc>::lowest();
  }
}

// PyTorch's rule (pooling_windows.h): a larger value or a NaN takes over, starting from the first position.
template <typename T>
__device__ __forceinline__ void pool_window(const T* plane, std::int64_t w, const Window& win, std::int64_t dh,
                                            std::int64_t dw, T* value, std::int64_t* index) {
  using Acc = compute_t<T>;
  Acc best;
  pooling::window_max<Acc>(plane, w, win, dh, dw, lowest<Acc>(), [](T v) { return to_compute(v); }, &best, index);
  *value = convert<T>(best);
}

template <typename T>
__global__ void max_pool2d_kernel(const T* x, T* values, std::int64_t* indices, const PoolGeometry g) {
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  ADCUDA_GRID_STRIDE_LOOP(i, total) {
    const std::int64_t ow = i % g.out_w, oh = (i / g.out_w) % g.out_h, plane = i / (g.out_w * g.out_h);
    pool_window(x + plane * g.h * g.w, g.w, pooling::max_window(g, oh, ow), g.dilation_h, g.dilation_w, values + i,
                indices + i);
  }
}

template <typename T>
__global__ void adaptive_max_pool2d_kernel(const T* x, T* values, std::int64_t* indices, std::int64_t planes,
                                           std::int64_t h, std::int64_t w, std::int64_t out_h, std::int64_t out_w) {
  const std::int64_t total = planes * out_h * out_w;
  ADCUDA_GRID_STRIDE_LOOP(i, total) {
    const std::int64_t ow = i % out_w, oh = (i / out_w) % out_h, plane = i / (out_w * out_h);
    pool_window(x + plane * h * w, w, pooling::adaptive_window(h, w, out_h, out_w, oh, ow), 1, 1, values + i,
                indices + i);
  }
}

template <typename T>
__global__ void max_pool2d_backward_kernel(T* dx, const T* g, const std::int64_t* indices, std::int64_t total,
                                           std::int64_t per_plane, std::int64_t plane_size) {
  ADCUDA_GRID_STRIDE_LOOP(i, total) {
    const std::int64_t plane = i / per_plane;
    atomicAdd(dx + plane * plane_size + indices[i], g[i]);
  }
}

// Average pooling's windows (pooling_windows.h): the outputs along one dim whose windows may cover input position i: [lo, hi] (callers test each).
template <bool kAdaptive>
__device__ __forceinline__ void covering(std::int64_t i, std::int64_t size, std::int64_t out, std::int64_t k,
                                         std::int64_t stride, std::int64_t pad, std::int64_t& lo, std::int64_t& hi) {
  if constexpr (kAdaptive) {
    // window o starts at floor(o * size / out), at or before i while o < (i + 1) * out / size; the windows
    // before o = floor(i * out / size) end at or before i
    lo = i * out / size;
    hi = min(out - 1, ((i + 1) * out + size - 1) / size - 1);
  } else {
    lo = i + pad < k ? 0 : (i + pad - k) / stride + 1;
    hi = min(out - 1, (i + pad) / stride);
  }
}

template <typename T, bool kAdaptive>
__global__ void avg_pool2d_kernel(const T* x, T* y, const AvgGeometry g) {
  using Acc = compute_t<T>;
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  ADCUDA_GRID_STRIDE_LOOP(i, total) {
    const std::int64_t ow = i % g.out_w, oh = (i / g.out_w) % g.out_h, plane = i / (g.out_w * g.out_h);
    const Window win = pooling::avg_window<kAdaptive>(g, oh, ow);
    y[i] = convert<T>(pooling::window_mean<Acc>(x + plane * g.h * g.w, g.w, win, [](T v) { return to_compute(v); }));
  }
}

template <typename T, bool kAdaptive>
__global__ void avg_pool2d_backward_kernel(const T* grad, T* dx, const AvgGeometry g) {
  using Acc = compute_t<T>;
  const std::int64_t total = g.planes * g.h * g.w;
  ADCUDA_GRID_STRIDE_LOOP(i, total) {
    const std::int64_t iw = i % g.w, ih = (i / g.w) % g.h, plane = i / (g.w * g.h);
    std::int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    covering<kAdaptive>(ih, g.h, g.out_h, g.kh, g.stride_h, g.pad_h, oh_lo, oh_hi);
    covering<kAdaptive>(iw, g.w, g.out_w, g.kw, g.stride_w, g.pad_w, ow_lo, ow_hi);
    const T* gp = grad + plane * g.out_h * g.out_w;
    Acc sum = Acc(0);
    for (std::int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (std::int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const Window win = pooling::avg_window<kAdaptive>(g, oh, ow);
        if (ih >= win.h0 && ih < win.h1 && iw >= win.w0 && iw < win.w1) {
          sum += to_compute(gp[oh * g.out_w + ow]) / static_cast<Acc>(win.divisor);
        }
      }
    }
    dx[i] = convert<T>(sum);
  }
}

void check_input(const char* op, const DeviceArray& x) {
  require(x.ndim() == 4, op, "expected a 4-d input (N, C, H, W), got shape " + format_dims(x.shape()));
  require(x.is_contiguous(), op, "the input must be contiguous");
}

}  // namespace

std::pair<DeviceArray, DeviceArray> max_pool2d(const DeviceArray& x, std::int64_t kh, std::int64_t kw,
                                               std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h,
                                               std::int64_t pad_w, std::int64_t dilation_h, std::int64_t dilation_w,
                                               std::int64_t out_h, std::int64_t out_w) {
  const char* op = "max_pool2d";
  check_input(op, x);
  require(kh >= 1 && kw >= 1 && stride_h >= 1 && stride_w >= 1 && dilation_h >= 1 && dilation_w >= 1 &&
              pad_h >= 0 && pad_w >= 0 && out_h >= 0 && out_w >= 0,
          op, "kernel, stride and dilation must be positive, padding and the output size non-negative");
  const Dims& s = x.shape();
  DeviceArray values = DeviceArray::empty({s[0], s[1], out_h, out_w}, x.dtype(), x.device());
  DeviceArray indices = DeviceArray::empty({s[0], s[1], out_h, out_w}, ScalarType::Int64, x.device());
  if (values.numel() == 0) return {values, indices};
  const PoolGeometry g{s[0] * s[1], s[2], s[3], out_h, out_w, kh, kw, stride_h, stride_w, pad_h, pad_w,
                       dilation_h, dilation_w};
  KernelLaunch launch(values, indices, x);
  dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool2d_kernel<T><<<grid_size(values.numel()), kBlockSize, 0, launch.stream()>>>(
        x.data<T>(), values.data<T>(), indices.data<std::int64_t>(), g);
  });
  ADCUDA_CHECK_LAUNCH();
  return {values, indices};
}

std::pair<DeviceArray, DeviceArray> adaptive_max_pool2d(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w) {
  const char* op = "adaptive_max_pool2d";
  check_input(op, x);
  const Dims& s = x.shape();
  require(out_h >= 0 && out_w >= 0, op, "the output size must be non-negative");
  require((s[2] > 0 && s[3] > 0) || out_h * out_w == 0, op,
          "cannot pool an empty plane of input " + format_dims(s));
  DeviceArray values = DeviceArray::empty({s[0], s[1], out_h, out_w}, x.dtype(), x.device());
  DeviceArray indices = DeviceArray::empty({s[0], s[1], out_h, out_w}, ScalarType::Int64, x.device());
  if (values.numel() == 0) return {values, indices};
  KernelLaunch launch(values, indices, x);
  dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    adaptive_max_pool2d_kernel<T><<<grid_size(values.numel()), kBlockSize, 0, launch.stream()>>>(
        x.data<T>(), values.data<T>(), indices.data<std::int64_t>(), s[0] * s[1], s[2], s[3], out_h, out_w);
  });
  ADCUDA_CHECK_LAUNCH();
  return {values, indices};
}

DeviceArray max_pool2d_backward(const DeviceArray& g, const DeviceArray& indices, std::int64_t h, std::int64_t w) {
  const char* op = "max_pool2d_backward";
  require(g.ndim() == 4 && indices.shape() == g.shape(), op,
          "grad " + format_dims(g.shape()) + " and indices " + format_dims(indices.shape()) + " do not fit");
  require(g.is_contiguous() && indices.is_contiguous() && indices.dtype() == ScalarType::Int64, op,
          "grad and int64 indices must be contiguous");
  require(g.dtype() == ScalarType::Float32 || g.dtype() == ScalarType::Float64, op,
          std::string("accumulates in float32 or float64, got ") + scalar_type_name(g.dtype()));
  const Dims& s = g.shape();
  DeviceArray dx = DeviceArray::empty({s[0], s[1], h, w}, g.dtype(), g.device());
  if (dx.numel() == 0) return dx;
  KernelLaunch launch(dx, g, indices);
  ADCUDA_CHECK(cudaMemsetAsync(dx.data_ptr(), 0, dx.nbytes(), launch.stream()));
  if (g.numel() == 0) return dx;
  const std::int64_t per_plane = s[2] * s[3];
  if (g.dtype() == ScalarType::Float32) {
    max_pool2d_backward_kernel<float><<<grid_size(g.numel()), kBlockSize, 0, launch.stream()>>>(
        dx.data<float>(), g.data<float>(), indices.data<std::int64_t>(), g.numel(), per_plane, h * w);
  } else {
    max_pool2d_backward_kernel<double><<<grid_size(g.numel()), kBlockSize, 0, launch.stream()>>>(
        dx.data<double>(), g.data<double>(), indices.data<std::int64_t>(), g.numel(), per_plane, h * w);
  }
  ADCUDA_CHECK_LAUNCH();
  return dx;
}

namespace {

void check_avg_geometry(const char* op, const AvgGeometry& g) {
  require(g.kh >= 1 && g.kw >= 1 && g.stride_h >= 1 && g.stride_w >= 1 && g.pad_h >= 0 && g.pad_w >= 0 &&
              2 * g.pad_h <= g.kh && 2 * g.pad_w <= g.kw && g.out_h >= 0 && g.out_w >= 0 && g.divisor_override >= 0,
          op,
          "kernel and stride must be positive, padding at most half the kernel, the output size and the divisor "
          "non-negative");
}

template <bool kAdaptive>
DeviceArray avg_pool_forward(const char* op, const DeviceArray& x, const AvgGeometry& g) {
  const Dims& s = x.shape();
  DeviceArray y = DeviceArray::empty({s[0], s[1], g.out_h, g.out_w}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  KernelLaunch launch(y, x);
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool2d_kernel<T, kAdaptive><<<grid_size(y.numel()), kBlockSize, 0, launch.stream()>>>(x.data<T>(),
                                                                                              y.data<T>(), g);
  });
  ADCUDA_CHECK_LAUNCH();
  return y;
}

template <bool kAdaptive>
DeviceArray avg_pool_backward(const char* op, const DeviceArray& grad, const AvgGeometry& g) {
  require(grad.ndim() == 4 && grad.is_contiguous() && grad.shape()[2] == g.out_h && grad.shape()[3] == g.out_w, op,
          "expected a contiguous 4-d gradient of the output, got shape " + format_dims(grad.shape()));
  const Dims& s = grad.shape();
  DeviceArray dx = DeviceArray::empty({s[0], s[1], g.h, g.w}, grad.dtype(), grad.device());
  if (dx.numel() == 0) return dx;
  KernelLaunch launch(dx, grad);
  if (grad.numel() == 0) {
    ADCUDA_CHECK(cudaMemsetAsync(dx.data_ptr(), 0, dx.nbytes(), launch.stream()));
    return dx;
  }
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool2d_backward_kernel<T, kAdaptive><<<grid_size(dx.numel()), kBlockSize, 0, launch.stream()>>>(
        grad.data<T>(), dx.data<T>(), g);
  });
  ADCUDA_CHECK_LAUNCH();
  return dx;
}

}  // namespace

DeviceArray avg_pool2d(const DeviceArray& x, std::int64_t kh, std::int64_t kw, std::int64_t stride_h,
                       std::int64_t stride_w, std::int64_t pad_h, std::int64_t pad_w, std::int64_t out_h,
                       std::int64_t out_w, bool count_include_pad, std::int64_t divisor_override) {
  const char* op = "avg_pool2d";
  check_input(op, x);
  const Dims& s = x.shape();
  const AvgGeometry g{s[0] * s[1], s[2],    s[3],  out_h,          out_w, kh, kw, stride_h,
                      stride_w,    pad_h,   pad_w, count_include_pad, divisor_override};
  check_avg_geometry(op, g);
  return avg_pool_forward<false>(op, x, g);
}

DeviceArray avg_pool2d_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w, std::int64_t kh,
                                std::int64_t kw, std::int64_t stride_h, std::int64_t stride_w, std::int64_t pad_h,
                                std::int64_t pad_w, bool count_include_pad, std::int64_t divisor_override) {
  const char* op = "avg_pool2d_backward";
  require(grad.ndim() == 4 && h >= 0 && w >= 0, op, "expected a 4-d gradient, got " + format_dims(grad.shape()));
  const AvgGeometry g{grad.shape()[0] * grad.shape()[1], h, w, grad.shape()[2], grad.shape()[3], kh, kw, stride_h,
                      stride_w, pad_h, pad_w, count_include_pad, divisor_override};
  check_avg_geometry(op, g);
  return avg_pool_backward<false>(op, grad, g);
}

DeviceArray adaptive_avg_pool2d(const DeviceArray& x, std::int64_t out_h, std::int64_t out_w) {
  const char* op = "adaptive_avg_pool2d";
  check_input(op, x);
  const Dims& s = x.shape();
  require(out_h >= 0 && out_w >= 0, op, "the output size must be non-negative");
  require((s[2] > 0 && s[3] > 0) || out_h * out_w == 0 || s[0] * s[1] == 0, op,
          "cannot pool an empty plane of input " + format_dims(s));
  const AvgGeometry g{s[0] * s[1], s[2], s[3], out_h, out_w, 1, 1, 1, 1, 0, 0, true, 0};
  return avg_pool_forward<true>(op, x, g);
}

DeviceArray adaptive_avg_pool2d_backward(const DeviceArray& grad, std::int64_t h, std::int64_t w) {
  const char* op = "adaptive_avg_pool2d_backward";
  require(grad.ndim() == 4 && h >= 0 && w >= 0, op, "expected a 4-d gradient, got " + format_dims(grad.shape()));
  require((h > 0 && w > 0) || grad.numel() == 0, op, "cannot pool an empty plane");
  const AvgGeometry g{grad.shape()[0] * grad.shape()[1], h, w, grad.shape()[2], grad.shape()[3], 1, 1, 1, 1, 0, 0,
                      true, 0};
  return avg_pool_backward<true>(op, grad, g);
}

}  // namespace adcuda
