// The loops every elementwise kernel shares (for .cu files only): an output computed from up to three
// operands, each an array broadcast to the output's shape (strides 0 where broadcast, never
// materialised) or a scalar kernel argument.
//
//   launch_map<Out>(functor, out, Arg<A>::of(a), Arg<B>::value(2.0f));
//
// picks one of two kernels:
//  - vectorised: every array operand is contiguous, has the output's shape and is aligned to the
//    vector width; each thread moves 128 bits of its widest operand per step, with int64 element
//    counts (any size); float64 always takes the strided loop;
//  - strided: anything else (views, transposes, broadcasting): dims merged by make_strided_indexer,
//    coordinates by FastDivmod in 32-bit arithmetic; an iteration space whose counts or offsets exceed
//    int32 is cut into blocks along its outer dims on the host, so huge tensors run as several launches.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/copy.h"
#include "runtime/device_array.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {

// ---------------------------------------------------------------------------------------------------
// dtype subsets: instantiate a kernel only for the dtypes its op is defined on.
template <typename F>
decltype(auto) dispatch_floating(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Float16: return f(TypeTag<__half>{});
    case ScalarType::BFloat16: return f(TypeTag<__nv_bfloat16>{});
    case ScalarType::Float32: return f(TypeTag<float>{});
    case ScalarType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": not defined for dtype " + scalar_type_name(type) +
                              " (floating point dtypes only)");
}

// Floating point and int32/int64 (no bool).
template <typename F>
decltype(auto) dispatch_numeric(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Int32: return f(TypeTag<std::int32_t>{});
    case ScalarType::Int64: return f(TypeTag<std::int64_t>{});
    case ScalarType::Float16: return f(TypeTag<__half>{});
    case ScalarType::BFloat16: return f(TypeTag<__nv_bfloat16>{});
    case ScalarType::Float32: return f(TypeTag<float>{});
    case ScalarType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": not defined for dtype " + scalar_type_name(type));
}

// bool, int32, int64.
template <typename F>
decltype(auto) dispatch_integral(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Bool: return f(TypeTag<bool>{});
    case ScalarType::Int32: return f(TypeTag<std::int32_t>{});
    case ScalarType::Int64: return f(TypeTag<std::int64_t>{});
    default: break;
  }
  throw std::invalid_argument(std::string(op) + ": not defined for dtype " + scalar_type_name(type) +
                              " (bool and integer dtypes only)");
}

// A Python scalar operand as the compute type of T (float for half types: the CPU backend also
// rounds scalars to fp32, not to fp16).
template <typename T>
compute_t<T> scalar_to_compute(const Scalar& value) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<C, bool>) {
    return value.as_bool;
  } else if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(value.as_float);
  } else {
    return value.kind == Scalar::Kind::Float ? static_cast<C>(value.as_float) : static_cast<C>(value.as_int);
  }
}

// ---------------------------------------------------------------------------------------------------
// operands
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// An input of a kernel: an array (ptr, read at an element offset) or a scalar (ptr == nullptr).
template <typename T>
struct Operand {
  using C = compute_t<T>;
  const T* ptr;
  C scalar;

  template <typename index_t>
  __device__ __forceinline__ C at(index_t offset) const {
    return ptr != nullptr ? to_compute(ptr[offset]) : scalar;
  }

  template <int N>
  struct Values {
    C v[N];
  };

  // Elements [base, base + N) of a contiguous array aligned to N elements, in one vector load.
  template <int N>
  __device__ __forceinline__ Values<N> fetch(std::int64_t base) const {
    Values<N> out;
    if (ptr == nullptr) {
#pragma unroll
      for (int j = 0; j < N; ++j) out.v[j] = scalar;
    } else {
      const Vec<T, N> loaded = *reinterpret_cast<const Vec<T, N>*>(ptr + base);
#pragma unroll
      for (int j = 0; j < N; ++j) out.v[j] = to_compute(loaded.v[j]);
    }
    return out;
  }
};

// Host side of an operand: an array (broadcast to the output's shape) or a scalar.
template <typename T>
struct Arg {
  using element_type = T;
  const DeviceArray* array = nullptr;
  compute_t<T> scalar{};

  static Arg of(const DeviceArray& a) { return Arg{&a, compute_t<T>{}}; }
  static Arg value(compute_t<T> v) { return Arg{nullptr, v}; }
};

// Elements per thread step: as many as make the widest operand's load 128 bits (4 float, 8 half).
template <typename... Types>
constexpr int vector_width() {
  constexpr std::size_t widest = std::max({sizeof(Types)...});
  return static_cast<int>(16 / widest);
}

// ---------------------------------------------------------------------------------------------------
// Division by a fixed divisor as a multiply and a shift (Granlund-Montgomery), for dividends below
// 2^31: StridedIndexer's % and / cost ~20 instructions per dim, this ~4.
struct FastDivmod {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;

  FastDivmod() = default;
  // A size-0 dim (an empty array or reduction) is never divided by, but building its divider must not
  // divide by zero on the host: it becomes a divider by 1.
  explicit FastDivmod(std::uint32_t d) : divisor(d == 0 ? 1 : d) {
    d = divisor;
    while ((std::uint64_t(1) << shift) < d) ++shift;
    multiplier = static_cast<std::uint32_t>(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << shift) - d)) / d + 1);
  }
  __host__ __device__ __forceinline__ std::uint32_t divide(std::uint32_t n) const {
#ifdef __CUDA_ARCH__
    const std::uint32_t high = __umulhi(n, multiplier);
#else
    const auto high = static_cast<std::uint32_t>((std::uint64_t(n) * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
};

// Element offsets of NArgs operands from a row-major linear index below 2^31 (the dims merged by
// make_strided_indexer, sizes as FastDivmods).
template <std::size_t NArgs>
struct FastIndexer {
  int ndim = 0;
  FastDivmod sizes[kMaxDims];
  std::int32_t strides[kMaxDims][NArgs] = {};

  FastIndexer() = default;
  explicit FastIndexer(const StridedIndexer<NArgs, std::int32_t>& merged) : ndim(merged.ndim) {
    for (int d = 0; d < ndim; ++d) {
      sizes[d] = FastDivmod(static_cast<std::uint32_t>(merged.sizes[d]));
      for (std::size_t k = 0; k < NArgs; ++k) strides[d][k] = merged.strides[d][k];
    }
  }

  __host__ __device__ __forceinline__ void offsets(std::uint32_t linear, std::int32_t (&out)[NArgs]) const {
#pragma unroll
    for (std::size_t k = 0; k < NArgs; ++k) out[k] = 0;
#pragma unroll 1
    for (int d = ndim - 1; d >= 0; --d) {
      const std::uint32_t quotient = sizes[d].divide(linear);
      const auto coordinate = static_cast<std::int32_t>(linear - quotient * sizes[d].divisor);
      linear = quotient;
#pragma unroll
      for (std::size_t k = 0; k < NArgs; ++k) out[k] += coordinate * strides[d][k];
    }
  }
};

// ---------------------------------------------------------------------------------------------------
// kernels
template <int N, typename F, typename Out, typename... Values>
__device__ __forceinline__ void apply_vector(const F& f, Out* out, const Values&... values) {
  Vec<Out, N> result;
#pragma unroll
  for (int j = 0; j < N; ++j) result.v[j] = convert<Out>(f(values.v[j]...));
  *reinterpret_cast<Vec<Out, N>*>(out) = result;
}

template <int N, typename F, typename Out, typename... Ins>
__global__ void map_vectorized_kernel(F f, Out* out, std::int64_t n, Operand<Ins>... ins) {
  const std::int64_t vectors = n / N;
  ADCUDA_GRID_STRIDE_LOOP(v, vectors) {
    const std::int64_t base = v * N;
    apply_vector<N>(f, out + base, ins.template fetch<N>(base)...);
  }
  // the last n % N elements (fewer than one block's threads), one per thread
  const std::int64_t tail = vectors * N + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) out[tail] = convert<Out>(f(ins.at(tail)...));
}

template <typename F, typename Out, std::size_t NArgs, std::size_t... Is, typename... Ins>
__device__ __forceinline__ void apply_strided(const F& f, Out* out, const std::int32_t (&offsets)[NArgs],
                                              std::index_sequence<Is...>, const Operand<Ins>&... ins) {
  out[offsets[0]] = convert<Out>(f(ins.at(offsets[Is + 1])...));
}

// Operand 0 of the indexer is the output; operand k + 1 is ins[k].
template <typename F, typename Out, typename... Ins>
__global__ void map_strided_kernel(F f, Out* out, std::int32_t n, FastIndexer<1 + sizeof...(Ins)> indexer,
                                   Operand<Ins>... ins) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    std::int32_t offsets[1 + sizeof...(Ins)];
    indexer.offsets(static_cast<std::uint32_t>(i), offsets);
    apply_strided(f, out, offsets, std::index_sequence_for<Ins...>{}, ins...);
  }
}

// ---------------------------------------------------------------------------------------------------
// host helpers

// The broadcast of shapes, NumPy's rules; std::invalid_argument naming the op and the shapes otherwise.
inline Dims broadcast_shapes(const char* op, std::initializer_list<const Dims*> shapes) {
  std::size_t ndim = 0;
  for (const Dims* s : shapes) ndim = std::max(ndim, s->size());
  Dims out(ndim, 1);
  for (const Dims* s : shapes) {
    const std::size_t lead = ndim - s->size();
    for (std::size_t i = 0; i < s->size(); ++i) {
      const std::int64_t n = (*s)[i];
      std::int64_t& o = out[lead + i];
      if (n == o || n == 1) continue;
      if (o != 1) {
        std::string text = std::string(op) + ": shapes";
        bool first = true;
        for (const Dims* t : shapes) {
          text += (first ? " " : " and ") + format_dims(*t);
          first = false;
        }
        throw std::invalid_argument(text + " cannot be broadcast");
      }
      o = n;
    }
  }
  return out;
}

// `a`'s strides when broadcast to `shape` (0 along broadcast dims), right-aligned as in NumPy.
inline Dims broadcast_strides(const DeviceArray& a, const Dims& shape) {
  Dims strides(shape.size(), 0);
  const std::size_t lead = shape.size() - a.shape().size();
  for (std::size_t i = 0; i < a.shape().size(); ++i) {
    if (a.shape()[i] != 1) strides[lead + i] = a.strides()[i];
  }
  return strides;
}

inline bool aligned_to(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The iteration over `shape` (NArgs operands with `strides`) cut into blocks whose element counts and
// element offsets fit int32: each block is a suffix of `shape` (its first dim possibly shortened)
// starting at per-operand element offsets. Most shapes are one block.
inline constexpr std::int64_t kInt32Limit = std::numeric_limits<std::int32_t>::max();

template <std::size_t NArgs>
struct Int32Block {
  Dims shape;
  std::array<std::int64_t, NArgs> offsets;
};

template <std::size_t NArgs>
void collect_int32_blocks(const Dims& shape, const std::array<Dims, NArgs>& strides, std::size_t first_dim,
                          const std::array<std::int64_t, NArgs>& offsets, std::vector<Int32Block<NArgs>>& blocks) {
  // numel and each operand's furthest offset over dims [dim, ndim): whether int32 covers them
  const auto fits_from = [&](std::size_t dim, std::int64_t& numel, std::array<std::int64_t, NArgs>& reach) {
    numel = 1;
    reach.fill(0);
    for (std::size_t d = dim; d < shape.size(); ++d) {
      numel *= shape[d];
      for (std::size_t k = 0; k < NArgs; ++k) reach[k] += (shape[d] - 1) * std::abs(strides[k][d]);
    }
    return numel <= kInt32Limit &&
           std::all_of(reach.begin(), reach.end(), [](std::int64_t r) { return r <= kInt32Limit; });
  };
  std::int64_t numel;
  std::array<std::int64_t, NArgs> reach;
  if (fits_from(first_dim, numel, reach)) {
    if (numel > 0) blocks.push_back({Dims(shape.begin() + first_dim, shape.end()), offsets});
    return;
  }
  const std::int64_t rows = shape[first_dim];
  std::int64_t rest_numel;
  std::array<std::int64_t, NArgs> rest_reach;
  if (!fits_from(first_dim + 1, rest_numel, rest_reach)) {
    for (std::int64_t r = 0; r < rows; ++r) {
      auto row_offsets = offsets;
      for (std::size_t k = 0; k < NArgs; ++k) row_offsets[k] += r * strides[k][first_dim];
      collect_int32_blocks(shape, strides, first_dim + 1, row_offsets, blocks);
    }
    return;
  }
  // as many rows per block as every limit allows
  std::int64_t chunk = std::max<std::int64_t>(kInt32Limit / std::max<std::int64_t>(rest_numel, 1), 1);
  for (std::size_t k = 0; k < NArgs; ++k) {
    const std::int64_t step = std::abs(strides[k][first_dim]);
    if (step > 0) chunk = std::min(chunk, (kInt32Limit - rest_reach[k]) / step + 1);
  }
  Dims block(shape.begin() + first_dim, shape.end());
  for (std::int64_t r = 0; r < rows; r += chunk) {
    block[0] = std::min(chunk, rows - r);
    auto block_offsets = offsets;
    for (std::size_t k = 0; k < NArgs; ++k) block_offsets[k] += r * strides[k][first_dim];
    blocks.push_back({block, block_offsets});
  }
}

// A strided launch: element offsets of each operand (the output first) and the indexer over the block.
template <std::size_t NArgs>
struct StridedLaunch {
  std::array<std::int64_t, NArgs> offsets;
  std::int32_t n;
  FastIndexer<NArgs> indexer;
};

// How launch_map covers `out`: one vectorised launch, or strided launches. Not templated on the
// functor, so the host code is compiled once per operand count rather than once per op and dtype.
template <std::size_t NArgs>
struct MapPlan {
  std::unique_ptr<KernelLaunch> launch;  // the device guard and stream, alive until the plan is run
  bool vectorised = false;
  std::vector<StridedLaunch<NArgs>> strided;
};

// `ins[k]` is null for a scalar operand; `itemsizes` are the output's then the inputs'; vector_width 0
// forbids the vectorised kernel. Orders the launch stream after the inputs' earlier uses. Kept out of
// line: it is the same for every functor and dtype, so hundreds of launch_map instantiations share it.
template <std::size_t NArgs>
[[gnu::noinline]] MapPlan<NArgs> plan_map(const DeviceArray& out, const std::array<const DeviceArray*, NArgs - 1>& ins,
                                          const std::array<std::size_t, NArgs>& itemsizes, int vector_width) {
  MapPlan<NArgs> plan;
  plan.launch = std::make_unique<KernelLaunch>(out);
  const KernelLaunch& launch = *plan.launch;
  for (const DeviceArray* a : ins) {
    if (a == nullptr) continue;
    if (a->device() != out.device()) {
      throw std::invalid_argument("elementwise kernel: operands are on cuda:" + std::to_string(a->device()) +
                                  " and cuda:" + std::to_string(out.device()));
    }
    a->storage()->use_on(launch.stream(), launch.device());
  }
  if (vector_width > 0) {
    const auto bytes = [&](std::size_t k) { return static_cast<std::size_t>(vector_width) * itemsizes[k]; };
    bool vectorisable = aligned_to(out.data_ptr(), bytes(0));
    for (std::size_t k = 0; k + 1 < NArgs && vectorisable; ++k) {
      const DeviceArray* a = ins[k];
      vectorisable = a == nullptr ||
                     (a->is_contiguous() && a->shape() == out.shape() && aligned_to(a->data_ptr(), bytes(k + 1)));
    }
    if (vectorisable) {
      plan.vectorised = true;
      return plan;
    }
  }
  const Dims& shape = out.shape();
  std::array<Dims, NArgs> strides;
  strides[0] = out.strides();
  for (std::size_t k = 0; k + 1 < NArgs; ++k) {
    strides[k + 1] = ins[k] != nullptr ? broadcast_strides(*ins[k], shape) : Dims(shape.size(), 0);
  }
  std::vector<Int32Block<NArgs>> blocks;
  collect_int32_blocks<NArgs>(shape, strides, 0, {}, blocks);
  for (const Int32Block<NArgs>& block : blocks) {
    std::array<Dims, NArgs> block_strides;
    std::array<const Dims*, NArgs> stride_ptrs;
    for (std::size_t k = 0; k < NArgs; ++k) {
      block_strides[k] = Dims(strides[k].end() - block.shape.size(), strides[k].end());
      stride_ptrs[k] = &block_strides[k];
    }
    std::int64_t n = 1;
    for (std::int64_t s : block.shape) n *= s;
    plan.strided.push_back(
        {block.offsets, static_cast<std::int32_t>(n),
         FastIndexer<NArgs>(make_strided_indexer<NArgs, std::int32_t>(block.shape, stride_ptrs))});
  }
  return plan;
}

template <typename T>
Operand<T> operand_at(const Arg<T>& arg, std::int64_t offset) {
  return Operand<T>{arg.array != nullptr ? arg.array->template data<T>() + offset : nullptr, arg.scalar};
}

template <int N, typename F, typename Out, typename... Ins>
void launch_vectorized(cudaStream_t stream, const F& f, Out* out, std::int64_t n, Operand<Ins>... ins) {
  map_vectorized_kernel<N, F, Out, Ins...><<<grid_size((n + N - 1) / N), kBlockSize, 0, stream>>>(f, out, n, ins...);
  ADCUDA_CHECK_LAUNCH();
}

template <typename F, typename Out, std::size_t NArgs, typename... Ins>
void launch_strided(cudaStream_t stream, const F& f, Out* out, const StridedLaunch<NArgs>& s, Operand<Ins>... ins) {
  map_strided_kernel<F, Out, Ins...><<<grid_size(s.n), kBlockSize, 0, stream>>>(f, out + s.offsets[0], s.n, s.indexer,
                                                                                 ins...);
  ADCUDA_CHECK_LAUNCH();
}

template <typename F, typename Out, std::size_t NArgs, std::size_t... Is, typename... Ins>
void launch_strided_all(cudaStream_t stream, const F& f, const DeviceArray& out, const MapPlan<NArgs>& plan,
                        std::index_sequence<Is...>, const Arg<Ins>&... args) {
  for (const StridedLaunch<NArgs>& s : plan.strided) {
    launch_strided(stream, f, out.data<Out>(), s, operand_at(args, s.offsets[Is + 1])...);
  }
}

// out[i] = f(ins[i]...) over out's shape (out is a new contiguous array; ins broadcast to it).
// Vectorize = false keeps a rarely used, code-heavy functor to the strided kernel alone.
template <typename Out, bool Vectorize = true, typename F, typename... Ins>
[[gnu::noinline]] void launch_map(const F& f, const DeviceArray& out, const Arg<Ins>&... args) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  constexpr std::size_t NArgs = 1 + sizeof...(Ins);
  constexpr int N = vector_width<Out, Ins...>();
  // float64 exists for gradcheck, not for speed: it takes the strided loop (one kernel less per op)
  constexpr bool has_double = (std::is_same_v<Out, double> || ... || std::is_same_v<Ins, double>);
  constexpr bool vectorized = Vectorize && !has_double;
  const MapPlan<NArgs> plan = plan_map<NArgs>(out, {args.array...}, {sizeof(Out), sizeof(Ins)...}, vectorized ? N : 0);
  const cudaStream_t stream = plan.launch->stream();
  if constexpr (vectorized) {
    if (plan.vectorised) {
      launch_vectorized<N>(stream, f, out.data<Out>(), n, operand_at(args, 0)...);
      return;
    }
  }
  launch_strided_all<F, Out>(stream, f, out, plan, std::index_sequence_for<Ins...>{}, args...);
}

}  // namespace adcuda
