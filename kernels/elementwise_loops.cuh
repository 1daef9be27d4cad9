// The loops every elementwise kernel shares (for .cu files only): an output computed from up to three
// operands, each an array broadcast to the output's shape (strides 0 where broadcast, never
// materialised) or a scalar kernel argument.
//
//   launch_map<Out>(functor, out, Arg<A>::of(a), Arg<B>::value(2.0f));
//
// picks one of two kernels:
//  - vectorised: the output seen as rows of a contiguous run (the innermost dim left after merging
//    the dims every operand can merge), every array operand either contiguous along that run or
//    constant along it (a bias row [N] against [M, N], a column [M, 1], a 0-d array), aligned to the
//    vector width. Each thread moves 128 bits of the widest operand per step: 16-byte loads of the
//    operands that run along the row, one load of those that are constant along it; the offsets of a
//    row's start cost one division per outer dim per vector, never per element. int64 element counts
//    (any size); float64 always takes the strided loop;
//  - strided: anything else (views, transposes, rows not a multiple of the vector width): dims merged
//    by make_strided_indexer, coordinates by FastDivmod in 32-bit arithmetic; an iteration space whose
//    counts or offsets exceed int32 is cut into blocks along its outer dims on the host, so huge
//    tensors run as several launches.
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
// dtype subsets: instantiate a kernel only for the dtypes its op is defined on (dispatch_floating, in
// runtime/dispatch.cuh, the nn kernels use too).

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

// An input of a kernel: an array (ptr, read at an element offset) or a scalar (ptr == nullptr). In the
// vectorised kernel an array either runs along the row (consecutive elements of a row are consecutive
// in memory) or is constant along it (one element per row: a broadcast column or a 0-d array).
template <typename T>
struct Operand {
  using C = compute_t<T>;
  const T* ptr;
  C scalar;
  bool along_row = true;

  template <typename index_t>
  __device__ __forceinline__ C at(index_t offset) const {
    return ptr != nullptr ? to_compute(ptr[offset]) : scalar;
  }

  template <int N>
  struct Values {
    C v[N];
  };

  // Elements [column, column + N) of the row starting at element `row`: one N-element vector load
  // (aligned: the host checked) for an array along the row, one element for one constant along it.
  template <int N>
  __device__ __forceinline__ Values<N> fetch(std::int64_t row, std::int64_t column) const {
    Values<N> out;
    if (ptr == nullptr) {
#pragma unroll
      for (int j = 0; j < N; ++j) out.v[j] = scalar;
    } else if (!along_row) {
      const C value = to_compute(ptr[row]);
#pragma unroll
      for (int j = 0; j < N; ++j) out.v[j] = value;
    } else {
      const Vec<T, N> loaded = *reinterpret_cast<const Vec<T, N>*>(ptr + row + column);
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

// Where each input's row starts, for the vectorised kernel: the output's rows (a contiguous run of
// elements each) numbered row-major over the outer dims, merged and at most kMaxRowDims (a bias, a
// column or a conv-style (C, 1, 1) operand needs one or two; more go to the strided loop, which keeps
// this per-kernel code small). One FastDivmod per outer dim but the outermost (rows below 2^31).
constexpr int kMaxRowDims = 3;

template <std::size_t NIns>
struct RowIndexer {
  int ndim = 0;  // outer dims; 0: the output is one row
  FastDivmod sizes[kMaxRowDims];
  std::int64_t strides[kMaxRowDims][NIns > 0 ? NIns : 1] = {};

  __device__ __forceinline__ void offsets(std::uint32_t row, std::int64_t (&out)[NIns > 0 ? NIns : 1]) const {
#pragma unroll
    for (std::size_t k = 0; k < NIns; ++k) out[k] = 0;
#pragma unroll
    for (int d = kMaxRowDims - 1; d > 0; --d) {
      if (d >= ndim) continue;
      const std::uint32_t quotient = sizes[d].divide(row);
      const auto coordinate = static_cast<std::int64_t>(row - quotient * sizes[d].divisor);
      row = quotient;
#pragma unroll
      for (std::size_t k = 0; k < NIns; ++k) out[k] += coordinate * strides[d][k];
    }
#pragma unroll
    for (std::size_t k = 0; k < NIns; ++k) out[k] += static_cast<std::int64_t>(row) * strides[0][k];
  }
};

// How the vectorised kernel walks the output: rows of vectors_per_row N-element vectors (a row length
// that is a multiple of the vector width N, unless there is one row, rows.ndim == 0).
template <std::size_t NIns>
struct RowPlan {
  FastDivmod vectors_per_row;
  RowIndexer<NIns> rows;
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

template <int N, typename F, typename Out, std::size_t... Is, typename... Ins>
__device__ __forceinline__ void apply_row_vector(const F& f, Out* out, const std::int64_t* row_offsets,
                                                 std::int64_t column, std::index_sequence<Is...>,
                                                 const Operand<Ins>&... ins) {
  apply_vector<N>(f, out, ins.template fetch<N>(row_offsets[Is], column)...);
}

// Vector v covers output elements [v * N, v * N + N), all in one row. With one row (rows.ndim == 0)
// the last n % N elements are done one per thread after the vectors.
template <int N, typename F, typename Out, typename... Ins>
__global__ void map_vectorized_kernel(F f, Out* out, std::int64_t n, RowPlan<sizeof...(Ins)> plan,
                                      Operand<Ins>... ins) {
  constexpr std::size_t kIns = sizeof...(Ins);
  const std::int64_t vectors = n / N;
  std::int64_t row_offsets[kIns > 0 ? kIns : 1] = {};
  ADCUDA_GRID_STRIDE_LOOP(v, vectors) {
    std::int64_t column = v * N;
    if (plan.rows.ndim > 0) {
      const std::uint32_t row = plan.vectors_per_row.divide(static_cast<std::uint32_t>(v));
      column = (v - static_cast<std::int64_t>(row) * plan.vectors_per_row.divisor) * N;
      plan.rows.offsets(row, row_offsets);
    }
    apply_row_vector<N>(f, out + v * N, row_offsets, column, std::index_sequence_for<Ins...>{}, ins...);
  }
  // the last n % N elements (one row only; fewer than one block's threads), one per thread
  const std::int64_t tail = vectors * N + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) apply_row_vector<1>(f, out + tail, row_offsets, tail, std::index_sequence_for<Ins...>{}, ins...);
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
  RowPlan<NArgs - 1> rows;                         // vectorised
  std::array<bool, NArgs - 1> along_row{};         // vectorised: input k runs along the rows
  std::vector<StridedLaunch<NArgs>> strided;
};

// Whether the vectorised kernel can cover `out` (NArgs operands with `strides`, the output's first; a
// scalar input has all-zero strides) in vectors of `width` elements; if so, fills plan.rows and
// plan.along_row. The innermost dim left after merging is the row: every input must have stride 1
// (runs along it) or 0 (constant along it) there, and each row must start vector-aligned in the
// output and in every input that runs along it (rows a multiple of `width`, unless there is one row).
template <std::size_t NArgs>
bool plan_rows(const Dims& shape, const std::array<Dims, NArgs>& strides, const std::array<bool, NArgs>& aligned,
               int width, MapPlan<NArgs>& plan) {
  if (!aligned[0]) return false;
  std::array<const Dims*, NArgs> stride_ptrs;
  for (std::size_t k = 0; k < NArgs; ++k) stride_ptrs[k] = &strides[k];
  const MergedDims<NArgs> merged = merge_dims<NArgs>(shape, stride_ptrs);
  if (merged.count == 0) return true;  // one element: one row, every input constant along it
  if (merged.count > kMaxRowDims + 1) return false;
  const std::int64_t row_length = merged.sizes[0];
  const int outer = merged.count - 1;
  if (outer > 0) {
    std::int64_t vectors = 1;
    for (int d = 0; d < merged.count; ++d) vectors *= merged.sizes[d];
    if (row_length % width != 0 || vectors / width > kInt32Limit) return false;
  }
  for (std::size_t k = 1; k < NArgs; ++k) {
    const std::int64_t inner = merged.strides[0][k];
    if (inner != 0 && inner != 1) return false;
    const bool along = inner == 1;
    if (along) {
      if (!aligned[k]) return false;
      for (int d = 1; d < merged.count; ++d) {
        if (merged.strides[d][k] % width != 0) return false;
      }
    }
    plan.along_row[k - 1] = along;
  }
  plan.rows.vectors_per_row = FastDivmod(static_cast<std::uint32_t>(outer > 0 ? row_length / width : 1));
  plan.rows.rows.ndim = outer;
  for (int d = 0; d < outer; ++d) {
    // merged dims are innermost first; the indexer's are outermost first
    const int from = merged.count - 1 - d;
    plan.rows.rows.sizes[d] = FastDivmod(static_cast<std::uint32_t>(merged.sizes[from]));
    for (std::size_t k = 1; k < NArgs; ++k) plan.rows.rows.strides[d][k - 1] = merged.strides[from][k];
  }
  return true;
}

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
  const Dims& shape = out.shape();
  std::array<Dims, NArgs> strides;
  strides[0] = out.strides();
  for (std::size_t k = 0; k + 1 < NArgs; ++k) {
    strides[k + 1] = ins[k] != nullptr ? broadcast_strides(*ins[k], shape) : Dims(shape.size(), 0);
  }
  if (vector_width > 0) {
    std::array<bool, NArgs> aligned;
    aligned[0] = aligned_to(out.data_ptr(), static_cast<std::size_t>(vector_width) * itemsizes[0]);
    for (std::size_t k = 1; k < NArgs; ++k) {
      aligned[k] = ins[k - 1] == nullptr ||
                   aligned_to(ins[k - 1]->data_ptr(), static_cast<std::size_t>(vector_width) * itemsizes[k]);
    }
    if (plan_rows<NArgs>(shape, strides, aligned, vector_width, plan)) {
      plan.vectorised = true;
      return plan;
    }
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

template <int N, typename F, typename Out, std::size_t NIns, std::size_t... Is, typename... Ins>
void launch_vectorized(cudaStream_t stream, const F& f, Out* out, std::int64_t n, const RowPlan<NIns>& rows,
                       const std::array<bool, NIns>& along_row, std::index_sequence<Is...>, const Arg<Ins>&... args) {
  map_vectorized_kernel<N, F, Out, Ins...><<<grid_size((n + N - 1) / N), kBlockSize, 0, stream>>>(
      f, out, n, rows, Operand<Ins>{args.array != nullptr ? args.array->template data<Ins>() : nullptr, args.scalar,
                                    along_row[Is]}...);
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
      launch_vectorized<N>(stream, f, out.data<Out>(), n, plan.rows, plan.along_row, std::index_sequence_for<Ins...>{},
                           args...);
      return;
    }
  }
  launch_strided_all<F, Out>(stream, f, out, plan, std::index_sequence_for<Ins...>{}, args...);
}

}  // namespace adcuda
