// Random kernels: one thread per Philox block of four words (philox.cuh), each turned into P values of
// the result by a draw functor (P = 4, or 2 where a value needs 64 bits). Dropout draws its mask with
// bernoulli's functor in the same pass that applies it.
#include "random.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "elementwise_loops.cuh"
#include "philox.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/launch.cuh"

namespace adcuda {

namespace {

template <typename T>
inline constexpr int kUniformBits = std::is_same_v<T, __half> ? 11 : std::is_same_v<T, __nv_bfloat16> ? 8 : 24;

template <typename T>
struct UniformDraw {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  __device__ __forceinline__ void operator()(const philox::Words& w, T (&out)[kPerBlock]) const {
    if constexpr (std::is_same_v<T, double>) {
      out[0] = philox::uniform_double(w.x[0], w.x[1]);
      out[1] = philox::uniform_double(w.x[2], w.x[3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = convert<T>(philox::uniform_bits(w.x[j], kUniformBits<T>));
    }
  }
};

template <typename T>
struct NormalDraw {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  __device__ __forceinline__ void operator()(const philox::Words& w, T (&out)[kPerBlock]) const {
    if constexpr (std::is_same_v<T, double>) {
      philox::box_muller(1.0 - philox::uniform_double(w.x[0], w.x[1]), philox::uniform_double(w.x[2], w.x[3]), out[0],
                         out[1]);
    } else {
      float z[4];
      philox::box_muller(1.0f - philox::uniform_bits(w.x[0], 24), philox::uniform_bits(w.x[1], 24), z[0], z[1]);
      philox::box_muller(1.0f - philox::uniform_bits(w.x[2], 24), philox::uniform_bits(w.x[3], 24), z[2], z[3]);
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = convert<T>(z[j]);
    }
  }
};

// low + an integer below `range`: from 32 random bits by multiply-shift when range <= 2^32 (four per
// block), else from 64 bits modulo range (two per block).
template <typename T, bool kWide>
struct IntegerDraw {
  static constexpr int kPerBlock = kWide ? 2 : 4;
  std::int64_t low;
  std::uint64_t range;
  __device__ __forceinline__ void operator()(const philox::Words& w, T (&out)[kPerBlock]) const {
    if constexpr (kWide) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const std::uint64_t word = static_cast<std::uint64_t>(w.x[2 * j]) << 32 | w.x[2 * j + 1];
        out[j] = convert<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + word % range));
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const std::uint64_t pick = (static_cast<std::uint64_t>(w.x[j]) * range) >> 32;
        out[j] = convert<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + pick));
      }
    }
  }
};

template <typename T>
struct BernoulliDraw {
  static constexpr int kPerBlock = 4;
  double p;
  __device__ __forceinline__ void operator()(const philox::Words& w, T (&out)[kPerBlock]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = convert<T>(static_cast<double>(philox::uniform_bits(w.x[j], 24)) < p);
  }
};

template <typename T, typename Draw>
__global__ void random_kernel(T* out, std::int64_t n, philox::Source source, Draw draw) {
  constexpr int P = Draw::kPerBlock;
  const std::uint64_t seed = source.seed_now();
  const std::uint64_t offset = source.offset_now();
  const std::int64_t blocks = (n + P - 1) / P;
  ADCUDA_GRID_STRIDE_LOOP(b, blocks) {
    T values[P];
    draw(philox::draw_block(seed, offset, static_cast<std::uint64_t>(b)), values);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const std::int64_t index = b * P + j;
      if (index < n) out[index] = values[j];
    }
  }
}

template <typename T>
struct alignas(4 * sizeof(T)) Quad {
  T item[4];
};

// Four elements per thread with the mask values BernoulliDraw<bool> gives bernoulli, so that the mask is
// the one bernoulli(shape, keep, bool, seed, offset) draws; whole quads move as one access when `aligned`.
template <typename T>
__global__ void dropout_kernel(const T* x, T* out, bool* mask, std::int64_t n, philox::Source source,
                               BernoulliDraw<bool> draw, compute_t<T> scale, bool aligned) {
  using Acc = compute_t<T>;
  const std::uint64_t seed = source.seed_now();
  const std::uint64_t offset = source.offset_now();
  const std::int64_t blocks = (n + 3) / 4;
  ADCUDA_GRID_STRIDE_LOOP(b, blocks) {
    bool keep[4];
    draw(philox::draw_block(seed, offset, static_cast<std::uint64_t>(b)), keep);
    if (aligned && b * 4 + 3 < n) {
      const Quad<T> in = reinterpret_cast<const Quad<T>*>(x)[b];
      Quad<T> result;
#pragma unroll
      for (int j = 0; j < 4; ++j) result.item[j] = convert<T>(to_compute(in.item[j]) * (keep[j] ? scale : Acc(0)));
      reinterpret_cast<Quad<T>*>(out)[b] = result;
      reinterpret_cast<uchar4*>(mask)[b] = make_uchar4(keep[0], keep[1], keep[2], keep[3]);
      continue;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t index = b * 4 + j;
      if (index < n) {
        mask[index] = keep[j];
        out[index] = convert<T>(to_compute(x[index]) * (keep[j] ? scale : Acc(0)));
      }
    }
  }
}

template <typename T>
__global__ void dropout_backward_kernel(const T* g, const bool* mask, T* out, std::int64_t n, compute_t<T> scale) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) { out[i] = convert<T>(to_compute(g[i]) * (mask[i] ? scale : compute_t<T>(0))); }
}

template <typename T, typename Draw>
void run_draw(const DeviceArray& out, std::uint64_t seed, std::uint64_t offset, const Draw& draw) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  KernelLaunch launch(out);
  constexpr int P = Draw::kPerBlock;
  const philox::Source source{seed, offset, capture_philox_state(launch.stream())};
  random_kernel<T, Draw><<<grid_size((n + P - 1) / P), kBlockSize, 0, launch.stream()>>>(out.data<T>(), n, source,
                                                                                         draw);
  ADCUDA_CHECK_LAUNCH();
}

}  // namespace

DeviceArray rand(const Dims& shape, ScalarType dtype, std::uint64_t seed, std::uint64_t offset, int device) {
  DeviceArray out = DeviceArray::empty(shape, dtype, device);
  dispatch_floating(dtype, "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_draw<T>(out, seed, offset, UniformDraw<T>{});
  });
  return out;
}

DeviceArray randn(const Dims& shape, ScalarType dtype, std::uint64_t seed, std::uint64_t offset, int device) {
  DeviceArray out = DeviceArray::empty(shape, dtype, device);
  dispatch_floating(dtype, "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_draw<T>(out, seed, offset, NormalDraw<T>{});
  });
  return out;
}

DeviceArray randint(std::int64_t low, std::int64_t high, const Dims& shape, ScalarType dtype, std::uint64_t seed,
                    std::uint64_t offset, int device) {
  if (high <= low) {
    throw std::invalid_argument("randint: expected low < high, got low=" + std::to_string(low) +
                                ", high=" + std::to_string(high));
  }
  DeviceArray out = DeviceArray::empty(shape, dtype, device);
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  dispatch_type(dtype, "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (range <= (std::uint64_t(1) << 32)) {
      run_draw<T>(out, seed, offset, IntegerDraw<T, false>{low, range});
    } else {
      run_draw<T>(out, seed, offset, IntegerDraw<T, true>{low, range});
    }
  });
  return out;
}

DeviceArray bernoulli(const Dims& shape, double p, ScalarType dtype, std::uint64_t seed, std::uint64_t offset,
                      int device) {
  DeviceArray out = DeviceArray::empty(shape, dtype, device);
  dispatch_type(dtype, "bernoulli", [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_draw<T>(out, seed, offset, BernoulliDraw<T>{p});
  });
  return out;
}

std::pair<DeviceArray, DeviceArray> dropout(const DeviceArray& x, double p, std::uint64_t seed, std::uint64_t offset) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw std::invalid_argument("dropout: dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  }
  if (!x.is_contiguous()) throw std::invalid_argument("dropout: the input must be contiguous");
  DeviceArray out = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray mask = DeviceArray::empty(x.shape(), ScalarType::Bool, x.device());
  const std::int64_t n = x.numel();
  // as the CPU backend: the kept probability and the scale in double, the scale then in the compute type
  const double keep = 1.0 - p;
  const double scale = p < 1.0 ? 1.0 / keep : 0.0;
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0) return;
    KernelLaunch launch(out, mask, x);
    const auto quad_aligned = [](const void* pointer, std::size_t bytes) {
      return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
    };
    const bool aligned = quad_aligned(x.data_ptr(), sizeof(Quad<T>)) && quad_aligned(out.data_ptr(), sizeof(Quad<T>)) &&
                         quad_aligned(mask.data_ptr(), 4);
    dropout_kernel<T><<<grid_size((n + 3) / 4), kBlockSize, 0, launch.stream()>>>(
        x.data<T>(), out.data<T>(), mask.data<bool>(), n,
        philox::Source{seed, offset, capture_philox_state(launch.stream())}, BernoulliDraw<bool>{keep},
        static_cast<compute_t<T>>(scale), aligned);
    ADCUDA_CHECK_LAUNCH();
  });
  return {out, mask};
}

DeviceArray dropout_backward(const DeviceArray& g, const DeviceArray& mask, double scale) {
  if (mask.dtype() != ScalarType::Bool || mask.shape() != g.shape() || !mask.is_contiguous() || !g.is_contiguous()) {
    throw std::invalid_argument("dropout_backward: expected a contiguous gradient and a contiguous bool mask of one "
                                "shape, got " + format_dims(g.shape()) + " and " + scalar_type_name(mask.dtype()) +
                                " " + format_dims(mask.shape()));
  }
  DeviceArray out = DeviceArray::empty(g.shape(), g.dtype(), g.device());
  const std::int64_t n = g.numel();
  dispatch_floating(g.dtype(), "dropout_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n == 0) return;
    KernelLaunch launch(out, g, mask);
    dropout_backward_kernel<T><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(g.data<T>(), mask.data<bool>(),
                                                                                 out.data<T>(), n,
                                                                                 static_cast<compute_t<T>>(scale));
    ADCUDA_CHECK_LAUNCH();
  });
  return out;
}

}  // namespace adcuda
