// What the fused NN kernels (softmax_loss.cu, norm.cu, attention.cu) share: math in the compute type
// (float for float/half/bfloat16, double for double), warp and block reductions, and the launch shape
// of "one block per row" kernels. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "runtime/dispatch.cuh"

namespace adcuda::nn {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename Acc>
__device__ __forceinline__ Acc exp_of(Acc x) {
  if constexpr (std::is_same_v<Acc, double>) {
    return ::exp(x);
  } else {
    return ::expf(x);
  }
}

template <typename Acc>
__device__ __forceinline__ Acc log_of(Acc x) {
  if constexpr (std::is_same_v<Acc, double>) {
    return ::log(x);
  } else {
    return ::logf(x);
  }
}

template <typename Acc>
__device__ __forceinline__ Acc sqrt_of(Acc x) {
  if constexpr (std::is_same_v<Acc, double>) {
    return ::sqrt(x);
  } else {
    return ::sqrtf(x);
  }
}

template <typename Acc>
__device__ __forceinline__ Acc negative_infinity() {
  return -static_cast<Acc>(INFINITY);
}

template <typename Acc>
__device__ __forceinline__ Acc quiet_nan() {
  return static_cast<Acc>(NAN);
}

// NaN-propagating max, as NumPy's amax (fmax would drop the NaN).
template <typename Acc>
__device__ __forceinline__ Acc max_propagating_nan(Acc a, Acc b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

// A running (max, sum of exp(x - max)) pair: online softmax's state.
template <typename Acc>
struct MaxSum {
  Acc max;
  Acc sum;
};

template <typename Acc>
__device__ __forceinline__ MaxSum<Acc> empty_max_sum() {
  return {negative_infinity<Acc>(), Acc(0)};
}

// Adds one finite value.
template <typename Acc>
__device__ __forceinline__ void add_to(MaxSum<Acc>& state, Acc value) {
  if (value > state.max) {
    state.sum = state.sum * exp_of(state.max - value) + Acc(1);
    state.max = value;
  } else {
    state.sum += exp_of(value - state.max);
  }
}

template <typename Acc>
__device__ __forceinline__ MaxSum<Acc> merge(MaxSum<Acc> a, MaxSum<Acc> b) {
  const Acc max = a.max > b.max ? a.max : b.max;
  if (max == negative_infinity<Acc>()) return {max, Acc(0)};
  return {max, a.sum * exp_of(a.max - max) + b.sum * exp_of(b.max - max)};
}

template <typename V>
__device__ __forceinline__ V shuffle_xor(V value, int offset) {
  return __shfl_xor_sync(kFullMask, value, offset);
}

template <typename Acc>
__device__ __forceinline__ MaxSum<Acc> shuffle_xor(MaxSum<Acc> value, int offset) {
  return {shuffle_xor(value.max, offset), shuffle_xor(value.sum, offset)};
}

// Every lane of the warp gets op over the warp's values.
template <typename V, typename Op>
__device__ __forceinline__ V warp_reduce(V value, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, shuffle_xor(value, offset));
  return value;
}

// Every thread of the block gets op over the block's values, combined in a fixed order (results do
// not depend on timing). blockDim.x is a multiple of 32; `scratch` holds 32 values and may be reused
// by the next call straight away.
template <typename V, typename Op>
__device__ __forceinline__ V block_reduce(V value, Op op, V* scratch) {
  value = warp_reduce(value, op);
  const int warps = blockDim.x / 32;
  if (warps == 1) return value;
  __syncthreads();  // the previous call's readers are done with scratch
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < warps; ++w) value = op(value, scratch[w]);
  return value;
}

struct Sum {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};

struct MaxPropagatingNan {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return max_propagating_nan(a, b);
  }
};

struct MergeMaxSum {
  template <typename Acc>
  __device__ __forceinline__ MaxSum<Acc> operator()(MaxSum<Acc> a, MaxSum<Acc> b) const {
    return merge(a, b);
  }
};

// V consecutive elements moved as one 16-byte (or narrower) access: the row kernels read and write
// rows in packs when the row length and the base address allow it, which memory-bound kernels need to
// get near the copy bandwidth with 2-byte types.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T item[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* at) {
  return *reinterpret_cast<const Pack<T, V>*>(at);
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* at, const Pack<T, V>& pack) {
  *reinterpret_cast<Pack<T, V>*>(at) = pack;
}

// Elements per 16-byte pack.
template <typename T>
constexpr int kPackWidth = 16 / static_cast<int>(sizeof(T));

// Whether rows of `n` elements starting at each pointer can be walked in packs of `width`.
template <typename... Pointers>
bool rows_packable(std::int64_t n, int width, std::size_t itemsize, const Pointers*... pointers) {
  const std::size_t bytes = static_cast<std::size_t>(width) * itemsize;
  return n % width == 0 && ((reinterpret_cast<std::uintptr_t>(pointers) % bytes == 0) && ...);
}

// Calls f(std::integral_constant<int, V>) with V = kPackWidth<T> when rows of `n` elements at every
// pointer can be walked in such packs (rows_packable), else V = 1: a kernel instantiated for both.
template <typename T, typename F, typename... Pointers>
void with_pack_width(std::int64_t n, F&& f, const Pointers*... pointers) {
  constexpr int kWide = kPackWidth<T>;
  if (rows_packable(n, kWide, sizeof(T), pointers...)) {
    f(std::integral_constant<int, kWide>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// Threads for a block that owns one row of `n` elements: about 8 elements per thread, a whole
// number of warps, at most 1024.
inline int row_block_threads(std::int64_t n) {
  int threads = 32;
  while (threads < 1024 && threads * 8 < n) threads *= 2;
  return threads;
}

// Blocks for `rows` rows, one block per row; kernels loop over the rest past the cap.
inline unsigned row_blocks(std::int64_t rows) {
  constexpr std::int64_t kMaxBlocks = std::int64_t(1) << 20;
  return static_cast<unsigned>(rows < kMaxBlocks ? (rows > 0 ? rows : 1) : kMaxBlocks);
}

}  // namespace adcuda::nn
