// Reductions over any set of axes of a strided array, one kernel template for every op.
//
// The input is seen as M outputs x K reduced elements: an output's base offset comes from the kept
// dims (in logical order, so the result is row-major), an element's offset within it from the
// reduced dims (merged where their strides allow, so most reductions index with one multiply).
// Two block layouts, chosen by where the reduced elements lie in memory:
//  - inner (the reduced dims are the innermost, e.g. a sum over the last dim): the x lanes of a block
//    share one output and read consecutive elements (128-bit loads for float/half rows that allow
//    them); partial results meet by warp shuffles, then through shared memory across warps;
//  - outer (e.g. a sum over dim 0, bias gradients): the x lanes are consecutive outputs, so reads
//    stay coalesced, and the y lanes split the reduction, meeting in shared memory. Where the outputs
//    are one contiguous run of a float/half input (a row-major array reduced over its leading dims),
//    each x lane owns 16 bytes of consecutive outputs and reads them with one vector load per row.
// When there are too few outputs to fill the GPU (a full sum of 2^28 elements has one), the reduced
// extent is split over gridDim.y blocks that write partial accumulators, and a second kernel combines
// them: two passes, no atomics, so results are deterministic run to run.
#include "reduce.h"

#include <cuda/std/limits>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "elementwise_loops.cuh"
#include "functors.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {

namespace {

constexpr int kReduceThreads = 256;

// ---------------------------------------------------------------------------------------------------
// Reducers: identity, step (fold one element with its index along the reduction), combine (merge two
// partial results; associative, and commutative up to rounding) and project (the output value).
// A is the accumulation type: fp32 for half types, fp64 for float64, int64 for integer sums.

template <typename A>
struct SumReducer {
  using acc_t = A;
  using value_t = A;
  A scale;  // 1/K for mean, 1 for sum (unused for integers)
  __device__ __forceinline__ A identity() const { return A(0); }
  // integer sums wrap around as NumPy's (math::wrapping_add: no signed overflow)
  __device__ __forceinline__ A step(A acc, A x, std::int64_t) const { return math::wrapping_add(acc, x); }
  __device__ __forceinline__ A combine(A a, A b) const { return math::wrapping_add(a, b); }
  template <typename Out>
  __device__ __forceinline__ Out project(A acc) const {
    if constexpr (std::is_floating_point_v<A>) return convert<Out>(acc * scale);
    else return convert<Out>(acc);
  }
};

template <typename A>
struct ProdReducer {
  using acc_t = A;
  using value_t = A;
  __device__ __forceinline__ A identity() const { return A(1); }
  __device__ __forceinline__ A step(A acc, A x, std::int64_t) const { return math::wrapping_mul(acc, x); }
  __device__ __forceinline__ A combine(A a, A b) const { return math::wrapping_mul(a, b); }
  template <typename Out>
  __device__ __forceinline__ Out project(A acc) const { return convert<Out>(acc); }
};

// amax / amin (all / any on bool), NaN-propagating as NumPy's.
template <typename A>
struct ExtremumReducer {
  using acc_t = A;
  using value_t = A;
  bool is_max;
  __device__ __forceinline__ A identity() const {
    if constexpr (std::is_floating_point_v<A>) {
      return is_max ? -cuda::std::numeric_limits<A>::infinity() : cuda::std::numeric_limits<A>::infinity();
    } else {
      return is_max ? cuda::std::numeric_limits<A>::lowest() : cuda::std::numeric_limits<A>::max();
    }
  }
  __device__ __forceinline__ A combine(A a, A b) const {
    return is_max ? math::Maximum{}(a, b) : math::Minimum{}(a, b);
  }
  __device__ __forceinline__ A step(A acc, A x, std::int64_t) const { return combine(acc, x); }
  template <typename Out>
  __device__ __forceinline__ Out project(A acc) const { return convert<Out>(acc); }
};

// Welford's running mean and sum of squared deviations; partial results merge by Chan's formula.
template <typename A>
struct WelfordReducer {
  struct acc_t {
    A mean;
    A m2;
    std::int64_t n;
  };
  using value_t = A;
  A correction;
  __device__ __forceinline__ acc_t identity() const { return {A(0), A(0), 0}; }
  __device__ __forceinline__ acc_t step(acc_t acc, A x, std::int64_t) const {
    acc.n += 1;
    const A delta = x - acc.mean;
    acc.mean += delta / A(acc.n);
    acc.m2 += delta * (x - acc.mean);
    return acc;
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const std::int64_t n = a.n + b.n;
    const A delta = b.mean - a.mean;
    const A b_share = A(b.n) / A(n);
    return {a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * A(a.n) * b_share, n};
  }
  template <typename Out>
  __device__ __forceinline__ Out project(acc_t acc) const {
    const A dof = A(acc.n) - correction;
    return convert<Out>(acc.m2 / (dof > A(0) ? dof : A(0)));
  }
};

// log-sum-exp as (max, sum of exp(x - max)), rescaled when the max grows: one pass over the data.
template <typename A>
struct LogSumExpReducer {
  struct acc_t {
    A max;
    A sum;
  };
  using value_t = A;
  __device__ __forceinline__ acc_t identity() const { return {-cuda::std::numeric_limits<A>::infinity(), A(0)}; }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    const A m = math::Maximum{}(a.max, b.max);
    // all -inf (or nothing yet), +inf or NaN: the max is the answer and the sum is never read
    if (m == -cuda::std::numeric_limits<A>::infinity() || m == cuda::std::numeric_limits<A>::infinity() || m != m) {
      return {m, a.sum + b.sum};
    }
    return {m, a.sum * math::exp_(a.max - m) + b.sum * math::exp_(b.max - m)};
  }
  __device__ __forceinline__ acc_t step(acc_t acc, A x, std::int64_t) const { return combine(acc, {x, A(1)}); }
  template <typename Out>
  __device__ __forceinline__ Out project(acc_t acc) const {
    const bool finite = acc.max == acc.max && acc.max != cuda::std::numeric_limits<A>::infinity() &&
                        acc.max != -cuda::std::numeric_limits<A>::infinity();
    return convert<Out>(finite ? acc.max + math::log_(acc.sum) : acc.max);
  }
};

// argmax / argmin: the first index of the extreme value; a NaN is the extreme (NumPy's rule).
template <typename A>
struct ArgReducer {
  struct acc_t {
    A value;
    std::int64_t index;  // -1: no element yet
  };
  using value_t = A;
  bool is_max;
  __device__ __forceinline__ acc_t identity() const { return {A(0), -1}; }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = math::is_nan(a.value);
    const bool b_nan = math::is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index < b.index ? a : b;
      return a_nan ? a : b;
    }
    if (a.value == b.value) return a.index < b.index ? a : b;
    const bool b_better = is_max ? a.value < b.value : b.value < a.value;
    return b_better ? b : a;
  }
  __device__ __forceinline__ acc_t step(acc_t acc, A x, std::int64_t index) const { return combine(acc, {x, index}); }
  template <typename Out>
  __device__ __forceinline__ Out project(acc_t acc) const { return static_cast<Out>(acc.index); }
};

// ---------------------------------------------------------------------------------------------------
// indexing

// Element offset from a row-major index over up to kMaxDims dims (merged). One dim, the common case,
// is one multiply; more use FastDivmod when the index space fits 31 bits.
struct DimIndexer {
  int ndim = 0;
  bool fast = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
  FastDivmod dividers[kMaxDims];

  __device__ __forceinline__ std::int64_t offset(std::int64_t linear) const {
    if (ndim == 0) return 0;
    if (ndim == 1) return linear * strides[0];
    std::int64_t result = 0;
    if (fast) {
      auto rest = static_cast<std::uint32_t>(linear);
#pragma unroll 1
      for (int d = ndim - 1; d >= 0; --d) {
        const std::uint32_t quotient = dividers[d].divide(rest);
        result += static_cast<std::int64_t>(rest - quotient * dividers[d].divisor) * strides[d];
        rest = quotient;
      }
    } else {
#pragma unroll 1
      for (int d = ndim - 1; d >= 0; --d) {
        result += (linear % sizes[d]) * strides[d];
        linear /= sizes[d];
      }
    }
    return result;
  }
};

struct ReduceParams {
  std::int64_t M;      // outputs
  std::int64_t K;      // reduced elements per output
  std::int64_t chunk;  // reduced elements per gridDim.y slice
  DimIndexer kept;     // output index -> base offset
  DimIndexer reduced;  // reduced index -> offset from the base
  bool inner;          // x lanes share an output (else x lanes are consecutive outputs)
  bool vector_loads;   // inner, reduced elements contiguous, every row start 4-element aligned
  bool column_vectors; // outer, outputs one contiguous run; x lanes own kColumnVector<In> outputs each
};

template <typename In>
inline constexpr bool kVectorLoads =
    std::is_same_v<In, float> || std::is_same_v<In, __half> || std::is_same_v<In, __nv_bfloat16>;

// Outputs per x lane in a column reduction: 16 bytes of input per row.
template <typename In>
inline constexpr int kColumnVector = 16 / static_cast<int>(sizeof(In));

// The reducers that column reductions meet in practice (sums and means: bias gradients; amax/amin;
// var: statistics over a batch) get the vectorised column kernel; the rest keep the scalar outer
// layout, which is correct for every layout and costs no extra kernel per reducer and dtype.
template <typename R>
inline constexpr bool kColumnVectorReducer = false;
template <typename A>
inline constexpr bool kColumnVectorReducer<SumReducer<A>> = true;
template <typename A>
inline constexpr bool kColumnVectorReducer<ExtremumReducer<A>> = true;
template <typename A>
inline constexpr bool kColumnVectorReducer<WelfordReducer<A>> = true;

template <typename R, typename In>
inline constexpr bool kColumnVectors = kVectorLoads<In> && kColumnVectorReducer<R>;

template <typename Acc>
__device__ __forceinline__ Acc* shared_accumulators() {
  extern __shared__ __align__(16) unsigned char reduce_shared[];
  return reinterpret_cast<Acc*>(reduce_shared);
}

// __shfl_down_sync of any trivially copyable accumulator, 32 bits at a time.
template <typename T>
__device__ __forceinline__ T shuffle_down(T value, int offset, int width) {
  if constexpr (sizeof(T) < 4) {
    return static_cast<T>(__shfl_down_sync(0xffffffffu, static_cast<int>(value), offset, width));
  } else {
    static_assert(sizeof(T) % 4 == 0, "accumulators shuffle in 32-bit words");
    constexpr int kWords = sizeof(T) / 4;
    int words[kWords];
    memcpy(words, &value, sizeof(T));
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = __shfl_down_sync(0xffffffffu, words[w], offset, width);
    memcpy(&value, words, sizeof(T));
    return value;
  }
}

// Combines the accumulators of a row's x lanes; the result is valid in lane x == 0.
template <typename R, typename Acc>
__device__ __forceinline__ Acc combine_along_x(const R& reducer, Acc acc) {
  const int width = blockDim.x < 32 ? blockDim.x : 32;
  for (int offset = width / 2; offset > 0; offset /= 2) acc = reducer.combine(acc, shuffle_down(acc, offset, width));
  if (blockDim.x > 32) {  // several warps per row: their lane-0 results meet in shared memory
    Acc* shared = shared_accumulators<Acc>();
    const int warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) shared[threadIdx.y * warps + threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {  // the row's first warp, all 32 lanes
      acc = threadIdx.x < warps ? shared[threadIdx.y * warps + threadIdx.x] : reducer.identity();
      for (int offset = 16; offset > 0; offset /= 2) acc = reducer.combine(acc, shuffle_down(acc, offset, 32));
    }
  }
  return acc;
}

// Combines the accumulators of a column's y lanes (blockDim.y a power of two); valid in y == 0.
template <typename R, typename Acc>
__device__ __forceinline__ Acc combine_along_y(const R& reducer, Acc acc) {
  Acc* shared = shared_accumulators<Acc>();
  const int index = threadIdx.y * blockDim.x + threadIdx.x;
  shared[index] = acc;
  __syncthreads();
  for (int s = blockDim.y / 2; s > 0; s /= 2) {
    if (threadIdx.y < s) shared[index] = reducer.combine(shared[index], shared[index + s * blockDim.x]);
    __syncthreads();
  }
  return shared[threadIdx.x];
}

template <typename R, typename In, typename Out>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_kernel(R reducer, const In* in, Out* out, typename R::acc_t* partials, ReduceParams p) {
  using Acc = typename R::acc_t;
  using V = typename R::value_t;
  const bool inner = p.inner;
  const int lanes = inner ? blockDim.x : blockDim.y;
  const int lane = inner ? threadIdx.x : threadIdx.y;
  const std::int64_t o = inner ? static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y
                               : static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t k_begin = static_cast<std::int64_t>(blockIdx.y) * p.chunk;
  const std::int64_t k_end = k_begin + p.chunk < p.K ? k_begin + p.chunk : p.K;
  Acc acc = reducer.identity();
  if (o < p.M) {
    const In* row = in + p.kept.offset(o);
    bool vectorised = false;
    if constexpr (kVectorLoads<In>) {
      if (p.vector_loads) {
        vectorised = true;
        const std::int64_t vector_end = k_begin + (k_end - k_begin) / 4 * 4;
        for (std::int64_t k = k_begin + 4 * lane; k < vector_end; k += 4 * lanes) {
          const Vec<In, 4> v = *reinterpret_cast<const Vec<In, 4>*>(row + k);
#pragma unroll
          for (int j = 0; j < 4; ++j) acc = reducer.step(acc, static_cast<V>(to_compute(v.v[j])), k + j);
        }
        for (std::int64_t k = vector_end + lane; k < k_end; k += lanes) {
          acc = reducer.step(acc, static_cast<V>(to_compute(row[k])), k);
        }
      }
    }
    if (!vectorised) {
#pragma unroll 4
      for (std::int64_t k = k_begin + lane; k < k_end; k += lanes) {
        acc = reducer.step(acc, static_cast<V>(to_compute(row[p.reduced.offset(k)])), k);
      }
    }
  }
  acc = inner ? combine_along_x(reducer, acc) : combine_along_y(reducer, acc);
  if (lane == 0 && o < p.M) {
    if (gridDim.y == 1) {
      out[o] = reducer.template project<Out>(acc);
    } else {
      partials[o * gridDim.y + blockIdx.y] = acc;
    }
  }
}

// A column reduction whose M outputs are one contiguous run (kept dims merged to stride 1, M a multiple
// of V): x lane owns outputs [o, o + V) and reads them with one V-element (16-byte) load per reduced
// element k, y lanes split [k_begin, k_end) and meet in shared memory, one output at a time.
template <typename R, typename In, typename Out, int V>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_columns_kernel(R reducer, const In* in, Out* out, typename R::acc_t* partials, ReduceParams p) {
  using Acc = typename R::acc_t;
  using Value = typename R::value_t;
  const std::int64_t o = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  const std::int64_t k_begin = static_cast<std::int64_t>(blockIdx.y) * p.chunk;
  const std::int64_t k_end = k_begin + p.chunk < p.K ? k_begin + p.chunk : p.K;
  Acc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = reducer.identity();
  if (o < p.M) {
    for (std::int64_t k = k_begin + threadIdx.y; k < k_end; k += blockDim.y) {
      const Vec<In, V> v = *reinterpret_cast<const Vec<In, V>*>(in + o + p.reduced.offset(k));
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = reducer.step(acc[j], static_cast<Value>(to_compute(v.v[j])), k);
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    __syncthreads();  // the previous output's readers are done with the shared accumulators
    const Acc total = combine_along_y(reducer, acc[j]);
    if (threadIdx.y == 0 && o < p.M) {
      if (gridDim.y == 1) {
        out[o + j] = reducer.template project<Out>(total);
      } else {
        partials[(o + j) * gridDim.y + blockIdx.y] = total;
      }
    }
  }
}

// Second pass of a split reduction: x lanes combine an output's `splits` partial accumulators.
template <typename R, typename Out>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_finalize_kernel(R reducer, const typename R::acc_t* partials, Out* out, std::int64_t M, int splits) {
  using Acc = typename R::acc_t;
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  Acc acc = reducer.identity();
  if (o < M) {
    for (int s = threadIdx.x; s < splits; s += blockDim.x) acc = reducer.combine(acc, partials[o * splits + s]);
  }
  acc = combine_along_x(reducer, acc);
  if (threadIdx.x == 0 && o < M) out[o] = reducer.template project<Out>(acc);
}

// ---------------------------------------------------------------------------------------------------
// host side

struct Dim {
  std::int64_t size;
  std::int64_t stride;
};

// Drops size-1 dims and merges neighbours that index like one dim (outer stride = inner stride * size).
std::vector<Dim> merge_dims(const std::vector<Dim>& dims) {
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!merged.empty() && merged.back().stride == d.stride * d.size) {
      merged.back() = {merged.back().size * d.size, d.stride};
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

DimIndexer make_dim_indexer(const std::vector<Dim>& dims, const char* what) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) {
    throw std::invalid_argument(std::string("reduce: the ") + what + " dims do not merge into " +
                                std::to_string(kMaxDims) + " or fewer; make the array contiguous first");
  }
  DimIndexer indexer;
  indexer.ndim = static_cast<int>(dims.size());
  std::int64_t count = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    indexer.sizes[d] = dims[d].size;
    indexer.strides[d] = dims[d].stride;
    count *= dims[d].size;
  }
  indexer.fast = count <= kInt32Limit;
  if (indexer.fast) {
    for (std::size_t d = 0; d < dims.size(); ++d) indexer.dividers[d] = FastDivmod(static_cast<std::uint32_t>(dims[d].size));
  }
  return indexer;
}

std::int64_t next_power_of_two(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> cache{};
  if (device < 0 || device >= static_cast<int>(cache.size())) device = 0;
  int count = cache[device].load(std::memory_order_relaxed);
  if (count == 0) {
    ADCUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    cache[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

struct ReducePlan {
  ReduceParams params;
  dim3 block;
  dim3 grid;
  int splits;
};

// `reduced[d]` says whether dim d is reduced. Reduced dims keep their logical order when
// `keep_order` (arg reductions report row-major indices); otherwise they are ordered by stride so
// that permuted layouts merge. `vector_type`: the input may take 4-element loads along rows;
// `column_width`: outputs per lane of the vectorised column kernel (0: not for this reducer/dtype).
ReducePlan plan_reduction(const DeviceArray& a, const std::vector<bool>& reduced, bool keep_order, bool vector_type,
                          int column_width) {
  std::vector<Dim> kept_dims, reduced_dims;
  for (int d = 0; d < a.ndim(); ++d) {
    (reduced[d] ? reduced_dims : kept_dims).push_back({a.shape()[d], a.strides()[d]});
  }
  if (!keep_order) {
    std::stable_sort(reduced_dims.begin(), reduced_dims.end(),
                     [](const Dim& x, const Dim& y) { return std::abs(x.stride) > std::abs(y.stride); });
  }
  kept_dims = merge_dims(kept_dims);
  reduced_dims = merge_dims(reduced_dims);
  ReducePlan plan{};
  ReduceParams& p = plan.params;
  p.M = 1;
  p.K = 1;
  std::int64_t min_kept = std::numeric_limits<std::int64_t>::max();
  std::int64_t min_reduced = std::numeric_limits<std::int64_t>::max();
  for (const Dim& d : kept_dims) {
    p.M *= d.size;
    min_kept = std::min(min_kept, std::abs(d.stride));
  }
  for (const Dim& d : reduced_dims) {
    p.K *= d.size;
    min_reduced = std::min(min_reduced, std::abs(d.stride));
  }
  p.kept = make_dim_indexer(kept_dims, "kept");
  p.reduced = make_dim_indexer(reduced_dims, "reduced");
  p.inner = p.M == 1 || (p.K > 1 && min_reduced < min_kept);

  // outputs one contiguous run, every row of them starting 16-byte aligned
  if (!p.inner && column_width > 0 && kept_dims.size() == 1 && kept_dims[0].stride == 1 &&
      p.M % column_width == 0 &&
      reinterpret_cast<std::uintptr_t>(a.data_ptr()) % (column_width * a.itemsize()) == 0) {
    p.column_vectors = true;
    for (const Dim& d : reduced_dims) p.column_vectors = p.column_vectors && d.stride % column_width == 0;
  }

  std::int64_t lanes, outputs_per_block;
  if (p.inner) {
    const std::int64_t x = std::clamp<std::int64_t>(next_power_of_two(p.K), 1, kReduceThreads);
    plan.block = dim3(static_cast<unsigned>(x), static_cast<unsigned>(kReduceThreads / x));
    lanes = x;
    outputs_per_block = kReduceThreads / x;
  } else if (p.column_vectors) {
    // at most 64 x lanes, so that at least 4 y lanes share the rows of every block
    const std::int64_t x = std::clamp<std::int64_t>(next_power_of_two(p.M / column_width), 8, 64);
    plan.block = dim3(static_cast<unsigned>(x), static_cast<unsigned>(kReduceThreads / x));
    lanes = kReduceThreads / x;
    outputs_per_block = x * column_width;
  } else {
    const std::int64_t x = std::clamp<std::int64_t>(next_power_of_two(p.M), 32, kReduceThreads);
    plan.block = dim3(static_cast<unsigned>(x), static_cast<unsigned>(kReduceThreads / x));
    lanes = kReduceThreads / x;
    outputs_per_block = x;
  }
  const std::int64_t blocks_x = (p.M + outputs_per_block - 1) / outputs_per_block;
  // split the reduced extent while the outputs alone leave SMs idle, keeping >= 16 elements per lane
  const std::int64_t target_blocks = 4 * static_cast<std::int64_t>(multiprocessor_count(a.device()));
  std::int64_t splits = 1;
  if (blocks_x < target_blocks) {
    splits = std::min((target_blocks + blocks_x - 1) / blocks_x, p.K / (lanes * 16));
    splits = std::clamp<std::int64_t>(splits, 1, 65535);
  }
  p.chunk = std::max<std::int64_t>((p.K + splits - 1) / splits, 1);
  p.chunk = (p.chunk + 3) / 4 * 4;  // slices start 4-element aligned for the vector loads
  splits = std::max<std::int64_t>((p.K + p.chunk - 1) / p.chunk, 1);
  plan.splits = static_cast<int>(splits);
  plan.grid = dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(splits));

  const std::size_t vector_bytes = 4 * a.itemsize();
  bool aligned = vector_type && p.inner && reduced_dims.size() == 1 && reduced_dims[0].stride == 1 &&
                 reinterpret_cast<std::uintptr_t>(a.data_ptr()) % vector_bytes == 0;
  for (const Dim& d : kept_dims) aligned = aligned && d.stride % 4 == 0;
  p.vector_loads = aligned;
  return plan;
}

// Runs `reducer` over the dims of `a` marked in `reduced` into the contiguous `out` (M elements).
template <typename R, typename In, typename Out>
void run_reduction(const R& reducer, const DeviceArray& a, const DeviceArray& out, const std::vector<bool>& reduced,
                   bool keep_order) {
  using Acc = typename R::acc_t;
  if (out.numel() == 0) return;
  KernelLaunch launch(out, a);
  constexpr bool kColumns = kColumnVectors<R, In>;
  const ReducePlan plan = plan_reduction(a, reduced, keep_order, kVectorLoads<In>, kColumns ? kColumnVector<In> : 0);
  const std::size_t shared_bytes = kReduceThreads * sizeof(Acc);
  const std::int64_t M = plan.params.M;
  std::optional<DeviceArray> workspace;  // the split reduction's partial accumulators
  Acc* partials = nullptr;
  if (plan.splits > 1) {
    workspace = DeviceArray::empty({M * plan.splits * static_cast<std::int64_t>(sizeof(Acc))}, ScalarType::Bool,
                                   out.device());
    partials = static_cast<Acc*>(workspace->data_ptr());
  }
  bool launched = false;
  if constexpr (kColumns) {
    if (plan.params.column_vectors) {
      reduce_columns_kernel<R, In, Out, kColumnVector<In>><<<plan.grid, plan.block, shared_bytes, launch.stream()>>>(
          reducer, a.data<In>(), out.data<Out>(), partials, plan.params);
      launched = true;
    }
  }
  if (!launched) {
    reduce_kernel<R, In, Out><<<plan.grid, plan.block, shared_bytes, launch.stream()>>>(
        reducer, a.data<In>(), out.data<Out>(), partials, plan.params);
  }
  ADCUDA_CHECK_LAUNCH();
  if (plan.splits == 1) return;
  const int x = static_cast<int>(std::min<std::int64_t>(next_power_of_two(plan.splits), 32));
  const dim3 block(x, kReduceThreads / x);
  const std::int64_t blocks = (M + block.y - 1) / block.y;
  reduce_finalize_kernel<R, Out><<<static_cast<unsigned>(blocks), block, shared_bytes, launch.stream()>>>(
      reducer, partials, out.data<Out>(), M, plan.splits);
  ADCUDA_CHECK_LAUNCH();
}

// Which dims `axes` reduce, validated.
std::vector<bool> reduced_mask(const char* op, const DeviceArray& a, const std::vector<std::int64_t>& axes) {
  std::vector<bool> mask(a.ndim(), false);
  for (std::int64_t axis : axes) {
    if (axis < 0 || axis >= a.ndim() || mask[axis]) {
      throw std::invalid_argument(std::string(op) + ": invalid or repeated axis " + std::to_string(axis) +
                                  " for an array of shape " + format_dims(a.shape()));
    }
    mask[axis] = true;
  }
  return mask;
}

Dims reduced_shape(const DeviceArray& a, const std::vector<bool>& mask, bool keepdim) {
  Dims shape;
  for (int d = 0; d < a.ndim(); ++d) {
    if (!mask[d]) shape.push_back(a.shape()[d]);
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

// Ops without an identity cannot reduce zero elements into a non-empty result (NumPy's ValueError).
void require_elements(const char* op, const DeviceArray& a, const std::vector<bool>& mask, std::int64_t outputs) {
  bool empty_reduction = false;
  for (int d = 0; d < a.ndim(); ++d) empty_reduction = empty_reduction || (mask[d] && a.shape()[d] == 0);
  if (empty_reduction && outputs > 0) {
    throw std::invalid_argument(std::string(op) + ": zero-size reduction over an array of shape " +
                                format_dims(a.shape()) + " (the operation has no identity)");
  }
}

}  // namespace

DeviceArray reduce(const std::string& op, const DeviceArray& a, const std::vector<std::int64_t>& axes, bool keepdim) {
  const std::vector<bool> mask = reduced_mask(op.c_str(), a, axes);
  const Dims shape = reduced_shape(a, mask, keepdim);
  const ScalarType dtype = a.dtype();
  const bool floating = is_floating_point(dtype);

  if (op == "all" || op == "any") {
    const DeviceArray truth = dtype == ScalarType::Bool ? a : astype(a, ScalarType::Bool);
    DeviceArray out = DeviceArray::empty(shape, ScalarType::Bool, a.device());
    run_reduction<ExtremumReducer<bool>, bool, bool>(ExtremumReducer<bool>{op == "any"}, truth, out, mask, false);
    return out;
  }
  if (op == "sum" || op == "mean") {
    if (op == "mean" && !floating) {
      throw std::invalid_argument(std::string("mean: not defined for dtype ") + scalar_type_name(dtype));
    }
    if (!floating) {
      DeviceArray out = DeviceArray::empty(shape, ScalarType::Int64, a.device());
      dispatch_integral(dtype, "sum", [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_reduction<SumReducer<std::int64_t>, T, std::int64_t>(SumReducer<std::int64_t>{1}, a, out, mask, false);
      });
      return out;
    }
    DeviceArray out = DeviceArray::empty(shape, dtype, a.device());
    const std::int64_t reduced_count = out.numel() == 0 ? 0 : a.numel() / out.numel();
    dispatch_floating(dtype, op.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = compute_t<T>;
      const A scale = op == "mean" ? static_cast<A>(1.0 / static_cast<double>(reduced_count)) : A(1);
      run_reduction<SumReducer<A>, T, T>(SumReducer<A>{scale}, a, out, mask, false);
    });
    return out;
  }
  if (op == "prod") {
    DeviceArray out = DeviceArray::empty(shape, floating ? dtype : ScalarType::Int64, a.device());
    if (floating) {
      dispatch_floating(dtype, "prod", [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_reduction<ProdReducer<compute_t<T>>, T, T>(ProdReducer<compute_t<T>>{}, a, out, mask, false);
      });
    } else {
      dispatch_integral(dtype, "prod", [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_reduction<ProdReducer<std::int64_t>, T, std::int64_t>(ProdReducer<std::int64_t>{}, a, out, mask, false);
      });
    }
    return out;
  }
  if (op == "amax" || op == "amin") {
    DeviceArray out = DeviceArray::empty(shape, dtype, a.device());
    require_elements(op.c_str(), a, mask, out.numel());
    dispatch_type(dtype, op.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = compute_t<T>;
      run_reduction<ExtremumReducer<A>, T, T>(ExtremumReducer<A>{op == "amax"}, a, out, mask, false);
    });
    return out;
  }
  throw std::invalid_argument("reduce: unknown op '" + op + "'");
}

DeviceArray argreduce(const std::string& op, const DeviceArray& a, std::optional<std::int64_t> axis, bool keepdim) {
  if (op != "argmax" && op != "argmin") throw std::invalid_argument("argreduce: unknown op '" + op + "'");
  std::vector<bool> mask(a.ndim(), true);
  Dims shape;
  if (axis) {
    mask = reduced_mask(op.c_str(), a, {*axis});
    shape = reduced_shape(a, mask, keepdim);
  } else if (keepdim) {
    shape = Dims(a.ndim(), 1);
  }
  DeviceArray out = DeviceArray::empty(shape, ScalarType::Int64, a.device());
  if (a.numel() == 0 && out.numel() > 0) {
    throw std::invalid_argument(op + ": attempt to get " + op + " of an empty sequence (shape " +
                                format_dims(a.shape()) + ")");
  }
  dispatch_type(a.dtype(), op.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = compute_t<T>;
    run_reduction<ArgReducer<A>, T, std::int64_t>(ArgReducer<A>{op == "argmax"}, a, out, mask, true);
  });
  return out;
}

DeviceArray var(const DeviceArray& a, const std::vector<std::int64_t>& axes, double correction, bool keepdim) {
  const std::vector<bool> mask = reduced_mask("var", a, axes);
  DeviceArray out = DeviceArray::empty(reduced_shape(a, mask, keepdim), a.dtype(), a.device());
  dispatch_floating(a.dtype(), "var", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = compute_t<T>;
    run_reduction<WelfordReducer<A>, T, T>(WelfordReducer<A>{static_cast<A>(correction)}, a, out, mask, false);
  });
  return out;
}

DeviceArray logsumexp(const DeviceArray& a, const std::vector<std::int64_t>& axes, bool keepdim) {
  const std::vector<bool> mask = reduced_mask("logsumexp", a, axes);
  DeviceArray out = DeviceArray::empty(reduced_shape(a, mask, keepdim), a.dtype(), a.device());
  require_elements("logsumexp", a, mask, out.numel());
  dispatch_floating(a.dtype(), "logsumexp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = compute_t<T>;
    run_reduction<LogSumExpReducer<A>, T, T>(LogSumExpReducer<A>{}, a, out, mask, false);
  });
  return out;
}

}  // namespace adcuda
