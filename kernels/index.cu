// Gathers and scatters over an index geometry (index.h). Moves are instantiated per element size;
// only the accumulating scatter needs the dtype (for its atomic add). Gathers walk the result by rows
// (its innermost merged dim): a row's start costs the coordinate math once, contiguous rows along
// which no index varies move in 16/8/4/2-byte units (index_select on a leading dim, a[idx] on rows);
// scatters locate every element.
#include "index.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "elementwise_loops.cuh"
#include "runtime/copy.h"
#include "runtime/device_errors.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"
#include "sort.h"

namespace adcuda {

namespace {

constexpr int kMaxIndexArrays = 8;

// The geometry with its dims merged, as kernels read it: per dim the strides of the base, of the
// values (scatters) and of each index array.
struct IndexParams {
  int ndim = 0;
  bool fast = false;  // fewer than 2^31 elements: coordinates by FastDivmod
  std::int64_t sizes[kMaxDims] = {};
  FastDivmod dividers[kMaxDims];
  std::int64_t base_strides[kMaxDims] = {};
  std::int64_t value_strides[kMaxDims] = {};
  int count = 0;
  const std::int64_t* indices[kMaxIndexArrays] = {};
  std::int64_t index_array_strides[kMaxIndexArrays][kMaxDims] = {};
  std::int64_t index_sizes[kMaxIndexArrays] = {};
  std::int64_t index_strides[kMaxIndexArrays] = {};
};

struct Located {
  std::int64_t base;
  std::int64_t value;
  bool valid;  // every index in range (check_indices reports the others; scatters skip them)
};

// Index array k's entry at `offset`, a negative one counted from the end. check_indices reports an index
// out of range without waiting for the answer (device_errors.h): until the error is raised at the next
// sync, such an index reads as 0 and clears `valid` (gathers read element 0 of the dim instead and
// scatters write nothing), so no memory outside is touched.
__device__ __forceinline__ std::int64_t index_at(const IndexParams& p, int k, std::int64_t offset, bool& valid) {
  std::int64_t i = p.indices[k][offset];
  if (i < 0) i += p.index_sizes[k];
  if (i < 0 || i >= p.index_sizes[k]) {
    valid = false;
    return 0;
  }
  return i;
}

// Offsets in the base and in the values of element `linear` (row-major over the geometry's shape).
__device__ __forceinline__ Located locate(const IndexParams& p, std::int64_t linear) {
  std::int64_t base = 0;
  std::int64_t value = 0;
  bool valid = true;
  std::int64_t index_offsets[kMaxIndexArrays];
#pragma unroll
  for (int k = 0; k < kMaxIndexArrays; ++k) index_offsets[k] = 0;
  auto rest = static_cast<std::uint32_t>(linear);
#pragma unroll 1
  for (int d = p.ndim - 1; d >= 0; --d) {
    std::int64_t c;
    if (p.fast) {
      const std::uint32_t q = p.dividers[d].divide(rest);
      c = rest - q * p.dividers[d].divisor;
      rest = q;
    } else {
      c = linear % p.sizes[d];
      linear /= p.sizes[d];
    }
    base += c * p.base_strides[d];
    value += c * p.value_strides[d];
#pragma unroll
    for (int k = 0; k < kMaxIndexArrays; ++k) {
      if (k < p.count) index_offsets[k] += c * p.index_array_strides[k][d];
    }
  }
#pragma unroll
  for (int k = 0; k < kMaxIndexArrays; ++k) {
    if (k < p.count) base += index_at(p, k, index_offsets[k], valid) * p.index_strides[k];
  }
  return {base, value, valid};
}

// A gather's row starts: the outer dims (all of p's but the innermost) locate a row's start once, in
// the base and in every index array; within the row an element is one stride step further.
struct RowStart {
  std::int64_t base;
  std::int64_t indices[kMaxIndexArrays];
};

// Where row `row` starts (outer dims of p: the first p.ndim - 1), index lookups not yet applied.
__device__ __forceinline__ RowStart locate_row(const IndexParams& p, std::int64_t row) {
  RowStart at{};
  auto rest = static_cast<std::uint32_t>(row);
#pragma unroll 1
  for (int d = p.ndim - 2; d >= 0; --d) {
    std::int64_t c;
    if (p.fast) {
      const std::uint32_t q = p.dividers[d].divide(rest);
      c = rest - q * p.dividers[d].divisor;
      rest = q;
    } else {
      c = row % p.sizes[d];
      row /= p.sizes[d];
    }
    at.base += c * p.base_strides[d];
#pragma unroll
    for (int k = 0; k < kMaxIndexArrays; ++k) {
      if (k < p.count) at.indices[k] += c * p.index_array_strides[k][d];
    }
  }
  return at;
}

// Rows along which no index array varies (index_select / a[idx] on a leading dim, the rows of an
// embedding): each row is a copy of `units` Units `stride` Units apart in the base (1 for contiguous
// rows, then Unit is the widest of 16/8/4/2/1 bytes the layout allows); its index lookups happen once.
// Groups of 2^group_shift lanes share a row, so short rows keep every lane busy.
template <typename Unit>
__global__ void gather_rows_kernel(Unit* out, const void* base, std::int64_t itemsize, std::int64_t rows,
                                   std::int64_t units, std::int64_t stride, int group_shift, const IndexParams p) {
  const int member = threadIdx.x & ((1 << group_shift) - 1);
  const std::int64_t group_size = std::int64_t(1) << group_shift;
  const std::int64_t rows_per_block = blockDim.x >> group_shift;
  for (std::int64_t row = blockIdx.x * rows_per_block + (threadIdx.x >> group_shift); row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
    const RowStart at = locate_row(p, row);
    std::int64_t offset = at.base;
    bool valid = true;  // a gather reads element 0 for an index out of range (index_at)
#pragma unroll
    for (int k = 0; k < kMaxIndexArrays; ++k) {
      if (k < p.count) offset += index_at(p, k, at.indices[k], valid) * p.index_strides[k];
    }
    // the host checked that every row start is Unit-aligned
    const Unit* source = reinterpret_cast<const Unit*>(static_cast<const char*>(base) + offset * itemsize);
    Unit* destination = out + row * units;
    for (std::int64_t u = member; u < units; u += group_size) destination[u] = source[u * stride];
  }
}

// Rows along which index arrays vary (gather along the last dim): element j of a row reads its index
// at the row's index offset plus j index-strides, with the row's start located once.
template <typename Unit>
__global__ void gather_indexed_rows_kernel(Unit* out, const Unit* base, std::int64_t rows, std::int64_t length,
                                           int group_shift, const IndexParams p) {
  const int member = threadIdx.x & ((1 << group_shift) - 1);
  const std::int64_t group_size = std::int64_t(1) << group_shift;
  const std::int64_t rows_per_block = blockDim.x >> group_shift;
  const int inner = p.ndim - 1;
  for (std::int64_t row = blockIdx.x * rows_per_block + (threadIdx.x >> group_shift); row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
    const RowStart at = locate_row(p, row);
    for (std::int64_t j = member; j < length; j += group_size) {
      std::int64_t offset = at.base + j * p.base_strides[inner];
      bool valid = true;  // a gather reads element 0 for an index out of range (index_at)
#pragma unroll
      for (int k = 0; k < kMaxIndexArrays; ++k) {
        if (k < p.count) {
          offset += index_at(p, k, at.indices[k] + j * p.index_array_strides[k][inner], valid) * p.index_strides[k];
        }
      }
      out[row * length + j] = base[offset];
    }
  }
}

template <typename Unit>
__global__ void scatter_kernel(Unit* base, const Unit* values, std::int64_t n, const IndexParams p) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const Located at = locate(p, i);
    if (at.valid) base[at.base] = values[at.value];
  }
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    if (value) *address = true;  // bool addition is or: idempotent, no atomic needed
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
  } else {
    atomicAdd(address, value);  // float, double, int32, __half (sm_70+), __nv_bfloat16 (sm_80+)
  }
}

template <typename T>
__global__ void scatter_add_kernel(T* base, const T* values, std::int64_t n, const IndexParams p) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const Located at = locate(p, i);
    if (at.valid) atomic_add(base + at.base, values[at.value]);
  }
}

// scatter_reduce's product, maximum and minimum: a compare-and-swap loop on the element's 4 or 8 bytes
// (float32, float64, int32, int64; the Python layer widens half types and bool). NaN propagates.
enum CombineOp : int { kCombineProd = 0, kCombineMax = 1, kCombineMin = 2 };

template <typename T>
__device__ __forceinline__ T combined(int op, T current, T value) {
  if (op == kCombineProd) return current * value;
  if constexpr (std::is_floating_point_v<T>) {
    if (current != current) return current;
    if (value != value) return value;
  }
  if (op == kCombineMax) return value > current ? value : current;
  return value < current ? value : current;
}

template <typename T>
__device__ void atomic_combine(T* address, T value, int op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_combine works on 4- and 8-byte elements");
  using Bits = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;
  Bits* word = reinterpret_cast<Bits*>(address);
  Bits seen = *word;
  while (true) {
    T current;
    memcpy(&current, &seen, sizeof(T));
    const T next = combined(op, current, value);
    Bits next_bits;
    memcpy(&next_bits, &next, sizeof(T));
    if (next_bits == seen) return;  // already the combined value (a larger maximum, a NaN)
    const Bits previous = atomicCAS(word, seen, next_bits);
    if (previous == seen) return;
    seen = previous;  // another thread wrote first: combine with what it wrote
  }
}

template <typename T>
__global__ void scatter_combine_kernel(T* base, const T* values, std::int64_t n, const IndexParams p, int op) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const Located at = locate(p, i);
    if (at.valid) atomic_combine(base + at.base, values[at.value], op);
  }
}

// deterministic scatters: destinations as sortable keys (offsets + shift >= 0; `nowhere`, past every
// destination, for an index out of range), then per run
__global__ void scatter_keys_kernel(std::int64_t* keys, std::int64_t* positions, std::int64_t n, const IndexParams p,
                                    std::int64_t shift, std::int64_t nowhere) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const Located at = locate(p, i);
    keys[i] = at.valid ? at.base + shift : nowhere;
    positions[i] = i;
  }
}

// The last duplicate (in index order) wins, as in NumPy.
template <typename Unit>
__global__ void scatter_last_kernel(Unit* base, const Unit* values, const std::int64_t* keys,
                                    const std::int64_t* positions, std::int64_t n, const IndexParams p,
                                    std::int64_t shift, std::int64_t nowhere) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    if (keys[i] == nowhere) continue;
    if (i == n - 1 || keys[i + 1] != keys[i]) base[keys[i] - shift] = values[locate(p, positions[i]).value];
  }
}

template <typename T, typename A>
__global__ void gather_values_kernel(A* out, const T* values, const std::int64_t* positions, std::int64_t n,
                                     const IndexParams p) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) { out[i] = static_cast<A>(to_compute(values[locate(p, positions[i]).value])); }
}

template <typename T, typename A>
__global__ void add_runs_kernel(T* base, const std::int64_t* keys, const A* sums, const std::int64_t* count,
                                std::int64_t n, std::int64_t shift, std::int64_t nowhere) {
  const std::int64_t runs = *count;
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    if (i >= runs) return;
    if (keys[i] == nowhere) continue;
    T* target = base + (keys[i] - shift);
    *target = convert<T>(static_cast<A>(to_compute(*target)) + sums[i]);
  }
}

__global__ void check_indices_kernel(const std::int64_t* indices, std::int64_t n, std::int64_t size,
                                     const DeviceErrorReport report) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const std::int64_t v = indices[i];
    if (v < -size || v >= size) report_device_error(report, v, size);
  }
}

// ---------------------------------------------------------------------------------------------------
// host side

IndexParams make_params(const IndexGeometry& g, const DeviceArray* values) {
  const std::size_t ndim = g.shape.size();
  const std::size_t count = g.indices.size();
  if (g.strides.size() != ndim || g.index_sizes.size() != count || g.index_strides.size() != count) {
    throw std::invalid_argument("index geometry: shape, strides and index lists differ in length");
  }
  if (count > static_cast<std::size_t>(kMaxIndexArrays)) {
    throw std::invalid_argument("index: at most " + std::to_string(kMaxIndexArrays) +
                                " index arrays are supported, got " + std::to_string(count));
  }
  for (const DeviceArray& idx : g.indices) {
    if (idx.dtype() != ScalarType::Int64 || idx.shape() != g.shape) {
      throw std::invalid_argument("index geometry: index arrays must be int64 of the result's shape " +
                                  format_dims(g.shape) + ", got " + scalar_type_name(idx.dtype()) + " " +
                                  format_dims(idx.shape()));
    }
  }
  if (values != nullptr && values->shape() != g.shape) {
    throw std::invalid_argument("index_put_: values of shape " + format_dims(values->shape()) +
                                " for an indexed result of shape " + format_dims(g.shape));
  }
  // every operand's strides per dim: row-major position, base, values, index arrays
  const Dims row_major = contiguous_strides(g.shape);
  const auto stride_of = [&](std::size_t operand, std::size_t d) -> std::int64_t {
    if (operand == 0) return row_major[d];
    if (operand == 1) return g.strides[d];
    if (operand == 2) return values != nullptr ? values->strides()[d] : 0;
    return g.indices[operand - 3].strides()[d];
  };
  const std::size_t operands = 3 + count;
  std::vector<std::size_t> kept;  // dims kept after merging, outermost first; merged dims fold into the next
  std::vector<std::int64_t> sizes;
  for (std::size_t d = 0; d < ndim; ++d) {
    if (g.shape[d] == 1) continue;
    if (!kept.empty()) {
      bool mergeable = true;
      for (std::size_t op = 0; op < operands && mergeable; ++op) {
        mergeable = stride_of(op, kept.back()) == stride_of(op, d) * g.shape[d];
      }
      if (mergeable) {
        kept.back() = d;
        sizes.back() *= g.shape[d];
        continue;
      }
    }
    kept.push_back(d);
    sizes.push_back(g.shape[d]);
  }
  if (kept.size() > static_cast<std::size_t>(kMaxDims)) {
    throw std::invalid_argument("index: the indexed result " + format_dims(g.shape) + " has more than " +
                                std::to_string(kMaxDims) + " dims that do not merge");
  }
  IndexParams p;
  p.ndim = static_cast<int>(kept.size());
  std::int64_t numel = 1;
  for (std::int64_t s : g.shape) numel *= s;
  p.fast = numel <= kInt32Limit;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::size_t d = kept[i];
    p.sizes[i] = sizes[i];
    if (p.fast) p.dividers[i] = FastDivmod(static_cast<std::uint32_t>(sizes[i]));
    p.base_strides[i] = stride_of(1, d);
    p.value_strides[i] = stride_of(2, d);
    for (std::size_t k = 0; k < count; ++k) p.index_array_strides[k][i] = stride_of(3 + k, d);
  }
  p.count = static_cast<int>(count);
  for (std::size_t k = 0; k < count; ++k) {
    p.indices[k] = g.indices[k].data<std::int64_t>();
    p.index_sizes[k] = g.index_sizes[k];
    p.index_strides[k] = g.index_strides[k];
  }
  return p;
}

std::int64_t numel_of(const Dims& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

int bits_for(std::uint64_t largest) {
  int bits = 1;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  return bits;
}

void order_after(const std::vector<DeviceArray>& arrays, const KernelLaunch& launch) {
  for (const DeviceArray& a : arrays) a.storage()->use_on(launch.stream(), launch.device());
}

void deterministic_scatter(const DeviceArray& base, const IndexParams& p, const DeviceArray& values, std::int64_t n,
                           bool accumulate, const KernelLaunch& launch) {
  const cudaStream_t stream = launch.stream();
  // keys: element offsets from the lowest element base reaches, so they are >= 0
  const std::pair<std::int64_t, std::int64_t> reach = base.extent();
  const std::int64_t lowest = reach.first;
  const std::int64_t end = reach.second;
  const std::int64_t shift = base.offset() - lowest;
  DeviceArray keys = DeviceArray::empty({n}, ScalarType::Int64, base.device());
  DeviceArray positions = DeviceArray::empty({n}, ScalarType::Int64, base.device());
  const std::int64_t nowhere = end - lowest;
  scatter_keys_kernel<<<grid_size(n), kBlockSize, 0, stream>>>(keys.data<std::int64_t>(),
                                                               positions.data<std::int64_t>(), n, p, shift, nowhere);
  ADCUDA_CHECK_LAUNCH();
  const std::pair<DeviceArray, DeviceArray> sorted =
      sort_pairs(keys, positions, bits_for(static_cast<std::uint64_t>(end - lowest)));
  const DeviceArray& sorted_keys = sorted.first;
  const DeviceArray& order = sorted.second;
  if (!accumulate) {
    dispatch_bits(base.itemsize(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      scatter_last_kernel<U><<<grid_size(n), kBlockSize, 0, stream>>>(
          static_cast<U*>(base.data_ptr()), static_cast<const U*>(values.data_ptr()), sorted_keys.data<std::int64_t>(),
          order.data<std::int64_t>(), n, p, shift, nowhere);
    });
    ADCUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_numeric(base.dtype(), "index_put_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = std::conditional_t<std::is_floating_point_v<compute_t<T>>, compute_t<T>, std::int64_t>;
    const ScalarType acc_type = std::is_same_v<A, float>    ? ScalarType::Float32
                                : std::is_same_v<A, double> ? ScalarType::Float64
                                                            : ScalarType::Int64;
    DeviceArray gathered = DeviceArray::empty({n}, acc_type, base.device());
    gather_values_kernel<T, A><<<grid_size(n), kBlockSize, 0, stream>>>(
        static_cast<A*>(gathered.data_ptr()), values.data<T>(), order.data<std::int64_t>(), n, p);
    ADCUDA_CHECK_LAUNCH();
    const KeyRuns runs = sum_runs(sorted_keys, gathered);
    add_runs_kernel<T, A><<<grid_size(n), kBlockSize, 0, stream>>>(base.data<T>(), runs.keys.data<std::int64_t>(),
                                                                   static_cast<const A*>(runs.sums.data_ptr()),
                                                                   runs.count.data<std::int64_t>(), n, shift, nowhere);
    ADCUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void check_indices(const std::vector<DeviceArray>& indices, const std::vector<std::int64_t>& sizes) {
  if (indices.size() != sizes.size()) throw std::invalid_argument("check_indices: one size per index array");
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const DeviceArray idx = contiguous(indices[k]);
    if (idx.dtype() != ScalarType::Int64) throw std::invalid_argument("check_indices: index arrays must be int64");
    const std::int64_t n = idx.numel();
    if (n == 0) continue;
    if (sizes[k] == 0) {  // every index is out of range: no need to read them (and no element 0 to stand in)
      throw std::out_of_range("index is out of bounds for dimension with size 0 (" + std::to_string(n) +
                              " indices given)");
    }
    KernelLaunch launch(idx);
    check_indices_kernel<<<grid_size(n), kBlockSize, 0, launch.stream()>>>(
        idx.data<std::int64_t>(), n, sizes[k], device_error_report(idx.device(), DeviceCheck::kIndexBounds));
    ADCUDA_CHECK_LAUNCH();
  }
}

DeviceArray index_gather(const DeviceArray& base, const IndexGeometry& geometry) {
  DeviceArray out = DeviceArray::empty(geometry.shape, base.dtype(), base.device());
  const std::int64_t n = out.numel();
  if (n == 0) return out;
  const IndexParams p = make_params(geometry, nullptr);
  KernelLaunch launch(out, base);
  order_after(geometry.indices, launch);
  const auto itemsize = static_cast<std::int64_t>(base.itemsize());
  const int inner = p.ndim - 1;
  const std::int64_t length = p.ndim > 0 ? p.sizes[inner] : 1;  // elements per row
  const std::int64_t rows = n / length;
  bool indexed_inner = false;
  for (int k = 0; k < p.count && inner >= 0; ++k) indexed_inner = indexed_inner || p.index_array_strides[k][inner] != 0;
  // lanes per row: enough to cover the row, at most a warp
  const auto group_shift_for = [](std::int64_t per_row) {
    int shift = 0;
    while (shift < 5 && (std::int64_t(1) << shift) < per_row) ++shift;
    return shift;
  };
  if (indexed_inner) {
    const int shift = group_shift_for(length);
    dispatch_bits(base.itemsize(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      gather_indexed_rows_kernel<U><<<grid_size(rows, kBlockSize >> shift), kBlockSize, 0, launch.stream()>>>(
          static_cast<U*>(out.data_ptr()), static_cast<const U*>(base.data_ptr()), rows, length, shift, p);
    });
    ADCUDA_CHECK_LAUNCH();
    return out;
  }
  // contiguous rows move in the widest unit that every row start (in the base and the result) and
  // the row length allow; strided rows element by element
  const std::int64_t inner_stride = p.ndim > 0 ? p.base_strides[inner] : 1;
  int unit = static_cast<int>(itemsize);
  if (inner_stride == 1 || length == 1) {
    const auto base_address = reinterpret_cast<std::uintptr_t>(base.data_ptr());
    for (const int bytes : {16, 8, 4, 2}) {
      if (bytes <= itemsize) break;
      bool fits = (length * itemsize) % bytes == 0 && base_address % bytes == 0;
      for (int d = 0; d < inner && fits; ++d) fits = (p.base_strides[d] * itemsize) % bytes == 0;
      for (int k = 0; k < p.count && fits; ++k) fits = (p.index_strides[k] * itemsize) % bytes == 0;
      if (fits) {
        unit = bytes;
        break;
      }
    }
  }
  const std::int64_t units = length * itemsize / unit;
  const std::int64_t stride = inner_stride == 1 || length == 1 ? 1 : inner_stride;
  const int shift = group_shift_for(units);
  dispatch_move_unit(unit, [&](auto tag) {
    using U = typename decltype(tag)::type;
    gather_rows_kernel<U><<<grid_size(rows, kBlockSize >> shift), kBlockSize, 0, launch.stream()>>>(
        static_cast<U*>(out.data_ptr()), base.data_ptr(), itemsize, rows, units, stride, shift, p);
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

void index_scatter_(const DeviceArray& base, const IndexGeometry& geometry, const DeviceArray& values, bool accumulate,
                    bool deterministic) {
  if (values.dtype() != base.dtype()) {
    throw std::invalid_argument(std::string("index_put_: values of dtype ") + scalar_type_name(values.dtype()) +
                                " for an array of dtype " + scalar_type_name(base.dtype()));
  }
  const std::int64_t n = numel_of(geometry.shape);
  if (n == 0) return;
  const IndexParams p = make_params(geometry, &values);
  KernelLaunch launch(base, values);
  order_after(geometry.indices, launch);
  if (deterministic && !(accumulate && base.dtype() == ScalarType::Bool)) {
    deterministic_scatter(base, p, values, n, accumulate, launch);
    return;
  }
  if (accumulate) {
    dispatch_type(base.dtype(), "index_put_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      scatter_add_kernel<T><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(base.data<T>(), values.data<T>(), n, p);
    });
  } else {
    dispatch_bits(base.itemsize(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      scatter_kernel<U><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(
          static_cast<U*>(base.data_ptr()), static_cast<const U*>(values.data_ptr()), n, p);
    });
  }
  ADCUDA_CHECK_LAUNCH();
}

void index_scatter_reduce_(const DeviceArray& base, const IndexGeometry& geometry, const DeviceArray& values,
                           const std::string& reduce) {
  const int op = reduce == "prod" ? kCombineProd : reduce == "amax" ? kCombineMax : reduce == "amin" ? kCombineMin : -1;
  if (op < 0) throw std::invalid_argument("scatter_reduce: unknown reduce '" + reduce + "' (prod, amax or amin)");
  if (values.dtype() != base.dtype()) {
    throw std::invalid_argument(std::string("scatter_reduce: values of dtype ") + scalar_type_name(values.dtype()) +
                                " for an array of dtype " + scalar_type_name(base.dtype()));
  }
  const std::int64_t n = numel_of(geometry.shape);
  if (n == 0) return;
  const IndexParams p = make_params(geometry, &values);
  KernelLaunch launch(base, values);
  order_after(geometry.indices, launch);
  const auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_combine_kernel<T><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(base.data<T>(), values.data<T>(), n,
                                                                                p, op);
  };
  switch (base.dtype()) {
    case ScalarType::Float32: run(TypeTag<float>{}); break;
    case ScalarType::Float64: run(TypeTag<double>{}); break;
    case ScalarType::Int32: run(TypeTag<std::int32_t>{}); break;
    case ScalarType::Int64: run(TypeTag<std::int64_t>{}); break;
    default:
      throw std::invalid_argument(std::string("scatter_reduce: no kernel for dtype ") + scalar_type_name(base.dtype()) +
                                  " (float32, float64, int32 and int64 only)");
  }
  ADCUDA_CHECK_LAUNCH();
}

}  // namespace adcuda
