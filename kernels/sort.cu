// Sorting, scans and compaction on CUB. CUB's device algorithms are heavy to compile, so they are
// instantiated for as few types as possible: every sort key is first mapped to an unsigned integer of
// the same order (uint32 or uint64), every scan runs on float32, float64 or int64, and a segmented sort
// is two stable global sorts (by key, then by row) over those same two key types.
#include "sort.h"

#if defined(ADCUDA_EMULATION)
#include "emulator/cub_host.h"  // the emulated build runs these CUB algorithms on the host
#else
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#endif

#include <cuda/std/functional>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "elementwise_loops.cuh"
#include "functors.cuh"
#include "reduce.h"
#include "runtime/copy.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {

namespace {

// Scratch memory for CUB from the caching allocator, on the thread's current stream.
DeviceArray scratch(std::size_t bytes, int device) {
  return DeviceArray::empty({static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))}, ScalarType::Bool, device);
}

// ---------------------------------------------------------------------------------------------------
// order-preserving unsigned keys

__device__ __forceinline__ std::uint32_t ordered_bits(float x) {
  if (x != x) return 0xFFC00000u;  // every NaN as one value above +inf
  if (x == 0.0f) x = 0.0f;         // -0.0 ties with 0.0
  const std::uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}
__device__ __forceinline__ std::uint64_t ordered_bits(double x) {
  if (x != x) return 0xFFF8000000000000ull;
  if (x == 0.0) x = 0.0;
  const auto bits = static_cast<std::uint64_t>(__double_as_longlong(x));
  return (bits & 0x8000000000000000ull) ? ~bits : bits | 0x8000000000000000ull;
}

template <typename T>
using key_t = std::conditional_t<sizeof(compute_t<T>) == 8, std::uint64_t, std::uint32_t>;

template <typename T>
__device__ __forceinline__ key_t<T> ordered_key(T value) {
  if constexpr (std::is_floating_point_v<compute_t<T>>) {
    return ordered_bits(to_compute(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? 1u : 0u;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return static_cast<std::uint32_t>(value) ^ 0x80000000u;
  } else {
    return static_cast<std::uint64_t>(value) ^ 0x8000000000000000ull;
  }
}

template <typename T>
__global__ void make_sort_keys_kernel(const T* in, key_t<T>* keys, std::int64_t* positions, std::int64_t n,
                                      bool descending) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const key_t<T> key = ordered_key(in[i]);
    keys[i] = descending ? static_cast<key_t<T>>(~key) : key;
    positions[i] = i;
  }
}

template <typename K>
__global__ void row_keys_kernel(const std::int64_t* positions, K* rows, std::int64_t n, std::int64_t row_length) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) { rows[i] = static_cast<K>(positions[i] / row_length); }
}

template <typename Unit>
__global__ void gather_sorted_kernel(const Unit* in, const std::int64_t* positions, Unit* values,
                                     std::int64_t* indices, std::int64_t n, std::int64_t row_length) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const std::int64_t p = positions[i];
    values[i] = in[p];
    indices[i] = p % row_length;
  }
}

int bits_for(std::uint64_t largest) {
  int bits = 1;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  return bits;
}

// Stable radix sort of (keys, values) pairs on the stream; returns the sorted pairs.
template <typename K>
void radix_sort_pairs(const K* keys_in, K* keys_out, const std::int64_t* values_in, std::int64_t* values_out,
                      std::int64_t n, int end_bit, int device, cudaStream_t stream) {
  std::size_t bytes = 0;
  ADCUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, values_in, values_out, n, 0, end_bit,
                                               stream));
  const DeviceArray temp = scratch(bytes, device);
  ADCUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), bytes, keys_in, keys_out, values_in, values_out, n, 0,
                                               end_bit, stream));
}

// Sorts the positions of `a`'s elements by key, then (stably) by row: each row's elements in order.
template <typename K>
DeviceArray sorted_positions(const DeviceArray& keys, DeviceArray positions, std::int64_t rows, std::int64_t row_length,
                             cudaStream_t stream) {
  const std::int64_t n = keys.numel();
  const int device = keys.device();
  const ScalarType key_type = sizeof(K) == 8 ? ScalarType::Int64 : ScalarType::Int32;
  DeviceArray sorted_keys = DeviceArray::empty({n}, key_type, device);
  DeviceArray by_key = DeviceArray::empty({n}, ScalarType::Int64, device);
  radix_sort_pairs<K>(static_cast<const K*>(keys.data_ptr()), static_cast<K*>(sorted_keys.data_ptr()),
                      positions.data<std::int64_t>(), by_key.data<std::int64_t>(), n, 8 * sizeof(K), device, stream);
  if (rows == 1) return by_key;
  // the row of each position, as a key the same radix sorts can take (uint32 while rows fit)
  const int row_bits = bits_for(static_cast<std::uint64_t>(rows - 1));
  const auto by_row = [&](auto key_tag) {
    using R = typename decltype(key_tag)::type;
    const ScalarType row_type = sizeof(R) == 8 ? ScalarType::Int64 : ScalarType::Int32;
    DeviceArray row_keys = DeviceArray::empty({n}, row_type, device);
    DeviceArray row_keys_sorted = DeviceArray::empty({n}, row_type, device);
    row_keys_kernel<R><<<grid_size(n), kBlockSize, 0, stream>>>(by_key.data<std::int64_t>(),
                                                                static_cast<R*>(row_keys.data_ptr()), n, row_length);
    ADCUDA_CHECK_LAUNCH();
    radix_sort_pairs<R>(static_cast<const R*>(row_keys.data_ptr()), static_cast<R*>(row_keys_sorted.data_ptr()),
                        by_key.data<std::int64_t>(), positions.data<std::int64_t>(), n, row_bits, device, stream);
  };
  if (row_bits <= 32) {
    by_row(TypeTag<std::uint32_t>{});
  } else {
    by_row(TypeTag<std::uint64_t>{});
  }
  return positions;
}

// ---------------------------------------------------------------------------------------------------
// scans, compaction

struct RowOf {
  std::int64_t row_length;
  __host__ __device__ std::int64_t operator()(std::int64_t i) const { return i / row_length; }
};

// An inclusive scan by `Op` (plus or multiplies) restarting at each row: one pass over the whole array.
template <typename V, typename Op>
void scan_rows(const V* in, V* out, std::int64_t n, std::int64_t row_length, int device, cudaStream_t stream, Op op) {
  const auto rows = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), RowOf{row_length});
  std::size_t bytes = 0;
  ADCUDA_CHECK(
      cub::DeviceScan::InclusiveScanByKey(nullptr, bytes, rows, in, out, op, n, cuda::std::equal_to<>{}, stream));
  const DeviceArray temp = scratch(bytes, device);
  ADCUDA_CHECK(cub::DeviceScan::InclusiveScanByKey(temp.data_ptr(), bytes, rows, in, out, op, n,
                                                   cuda::std::equal_to<>{}, stream));
}

// The running sums (plus) or products (multiplies) along the last dim, in the scan's own type: fp32
// for half types, int64 for integers and bool.
template <typename Op>
DeviceArray scan_last_dim(const DeviceArray& a, Op op) {
  const ScalarType dtype = a.dtype();
  const bool floating = is_floating_point(dtype);
  const ScalarType work = !floating ? ScalarType::Int64
                          : dtype == ScalarType::Float64 ? ScalarType::Float64
                                                         : ScalarType::Float32;
  const DeviceArray in = a.dtype() == work ? contiguous(a) : astype(a, work);
  DeviceArray out = DeviceArray::empty(a.shape(), work, a.device());
  const std::int64_t n = a.numel();
  if (n > 0) {
    const std::int64_t row_length = a.ndim() == 0 ? 1 : a.shape().back();
    KernelLaunch launch(out, in);
    switch (work) {
      case ScalarType::Float32:
        scan_rows<float>(in.data<float>(), out.data<float>(), n, row_length, a.device(), launch.stream(), op);
        break;
      case ScalarType::Float64:
        scan_rows<double>(in.data<double>(), out.data<double>(), n, row_length, a.device(), launch.stream(), op);
        break;
      default:
        scan_rows<std::int64_t>(in.data<std::int64_t>(), out.data<std::int64_t>(), n, row_length, a.device(),
                                launch.stream(), op);
        break;
    }
  }
  return floating && work != dtype ? astype(out, dtype) : out;
}

__global__ void unravel_kernel(const std::int64_t* flat, std::int64_t* coordinates, std::int64_t count,
                               const std::int64_t* sizes, int ndim) {
  ADCUDA_GRID_STRIDE_LOOP(i, count) {
    std::int64_t rest = flat[i];
    for (int d = ndim - 1; d >= 0; --d) {
      coordinates[i * ndim + d] = rest % sizes[d];
      rest /= sizes[d];
    }
  }
}

}  // namespace

std::pair<DeviceArray, DeviceArray> sort_rows(const DeviceArray& a_in, bool descending) {
  const DeviceArray a = contiguous(a_in);
  const std::int64_t n = a.numel();
  const std::int64_t row_length = a.ndim() == 0 ? 1 : a.shape().back();
  DeviceArray values = DeviceArray::empty(a.shape(), a.dtype(), a.device());
  DeviceArray indices = DeviceArray::empty(a.shape(), ScalarType::Int64, a.device());
  if (n == 0) return {values, indices};
  const std::int64_t rows = n / row_length;
  KernelLaunch launch(values, indices, a);
  const cudaStream_t stream = launch.stream();
  DeviceArray positions = DeviceArray::empty({n}, ScalarType::Int64, a.device());
  std::optional<DeviceArray> sorted;
  dispatch_type(a.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = key_t<T>;
    DeviceArray keys = DeviceArray::empty({n}, sizeof(K) == 8 ? ScalarType::Int64 : ScalarType::Int32, a.device());
    make_sort_keys_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(a.data<T>(), static_cast<K*>(keys.data_ptr()),
                                                                      positions.data<std::int64_t>(), n, descending);
    ADCUDA_CHECK_LAUNCH();
    sorted = sorted_positions<K>(keys, positions, rows, row_length, stream);
  });
  switch (a.itemsize()) {
    case 1:
      gather_sorted_kernel<std::uint8_t><<<grid_size(n), kBlockSize, 0, stream>>>(
          a.data<std::uint8_t>(), sorted->data<std::int64_t>(), values.data<std::uint8_t>(), indices.data<std::int64_t>(),
          n, row_length);
      break;
    case 2:
      gather_sorted_kernel<std::uint16_t><<<grid_size(n), kBlockSize, 0, stream>>>(
          a.data<std::uint16_t>(), sorted->data<std::int64_t>(), values.data<std::uint16_t>(),
          indices.data<std::int64_t>(), n, row_length);
      break;
    case 4:
      gather_sorted_kernel<std::uint32_t><<<grid_size(n), kBlockSize, 0, stream>>>(
          a.data<std::uint32_t>(), sorted->data<std::int64_t>(), values.data<std::uint32_t>(),
          indices.data<std::int64_t>(), n, row_length);
      break;
    default:
      gather_sorted_kernel<std::uint64_t><<<grid_size(n), kBlockSize, 0, stream>>>(
          a.data<std::uint64_t>(), sorted->data<std::int64_t>(), values.data<std::uint64_t>(),
          indices.data<std::int64_t>(), n, row_length);
      break;
  }
  ADCUDA_CHECK_LAUNCH();
  return {values, indices};
}

DeviceArray cumsum_rows(const DeviceArray& a) { return scan_last_dim(a, cuda::std::plus<>{}); }

DeviceArray cumprod_rows(const DeviceArray& a) { return scan_last_dim(a, cuda::std::multiplies<>{}); }

namespace {

// The running extremes' combine: NaN absorbs (PyTorch's cummax and cummin propagate it), else the
// larger (or smaller) of the two. The scan hands a NaN in either position, so both are tested.
struct NanPropagatingMax {
  template <typename C> __host__ __device__ C operator()(C a, C b) const {
    return a != a ? a : b != b ? b : b > a ? b : a;
  }
};
struct NanPropagatingMin {
  template <typename C> __host__ __device__ C operator()(C a, C b) const {
    return a != a ? a : b != b ? b : b < a ? b : a;
  }
};

// logaddexp's functor (functors.cuh) on floating scans; integers never reach it (logcumsumexp takes
// floating input only), so their instantiation, which the switch of scan_last_dim needs, adds.
struct LogAddExpScan {
  template <typename C> __host__ __device__ C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return math::LogAddExp{}(a, b);
    } else {
      return a + b;
    }
  }
};

}  // namespace

DeviceArray scan_rows(const DeviceArray& a, const std::string& op) {
  if (op == "max") return scan_last_dim(a, NanPropagatingMax{});
  if (op == "min") return scan_last_dim(a, NanPropagatingMin{});
  if (op == "logaddexp") return scan_last_dim(a, LogAddExpScan{});
  throw std::invalid_argument("scan: op must be 'max', 'min' or 'logaddexp', got '" + op + "'");
}

DeviceArray nonzero(const DeviceArray& mask_in) {
  const DeviceArray mask = contiguous(mask_in.dtype() == ScalarType::Bool ? mask_in : astype(mask_in, ScalarType::Bool));
  const int ndim = mask.ndim();
  std::vector<std::int64_t> all_axes(ndim);
  for (int d = 0; d < ndim; ++d) all_axes[d] = d;
  const DeviceArray total = reduce("sum", mask, all_axes, false);
  std::int64_t count = 0;
  copy_device_to_host(&count, total, sizeof(count));
  DeviceArray coordinates = DeviceArray::empty({count, ndim}, ScalarType::Int64, mask.device());
  if (count == 0 || ndim == 0) return coordinates;

  const std::int64_t n = mask.numel();
  KernelLaunch launch(coordinates, mask);
  const cudaStream_t stream = launch.stream();
  DeviceArray flat = DeviceArray::empty({count}, ScalarType::Int64, mask.device());
  DeviceArray selected = DeviceArray::empty({1}, ScalarType::Int64, mask.device());
  const thrust::counting_iterator<std::int64_t> positions(0);
  std::size_t bytes = 0;
  ADCUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, positions, mask.data<bool>(), flat.data<std::int64_t>(),
                                          selected.data<std::int64_t>(), n, stream));
  const DeviceArray temp = scratch(bytes, mask.device());
  ADCUDA_CHECK(cub::DeviceSelect::Flagged(temp.data_ptr(), bytes, positions, mask.data<bool>(),
                                          flat.data<std::int64_t>(), selected.data<std::int64_t>(), n, stream));
  // the mask's sizes, for the unravelling
  DeviceArray sizes = DeviceArray::empty({ndim}, ScalarType::Int64, mask.device());
  copy_host_to_device(sizes, mask.shape().data(), ndim * sizeof(std::int64_t), true);
  unravel_kernel<<<grid_size(count), kBlockSize, 0, stream>>>(flat.data<std::int64_t>(),
                                                             coordinates.data<std::int64_t>(), count,
                                                             sizes.data<std::int64_t>(), ndim);
  ADCUDA_CHECK_LAUNCH();
  return coordinates;
}

std::pair<DeviceArray, DeviceArray> sort_pairs(const DeviceArray& keys, const DeviceArray& values, int key_bits) {
  const std::int64_t n = keys.numel();
  DeviceArray keys_out = DeviceArray::empty({n}, ScalarType::Int64, keys.device());
  DeviceArray values_out = DeviceArray::empty({n}, ScalarType::Int64, keys.device());
  if (n == 0) return {keys_out, values_out};
  KernelLaunch launch(keys_out, values_out, keys, values);
  radix_sort_pairs<std::uint64_t>(static_cast<const std::uint64_t*>(keys.data_ptr()),
                                  static_cast<std::uint64_t*>(keys_out.data_ptr()), values.data<std::int64_t>(),
                                  values_out.data<std::int64_t>(), n, std::clamp(key_bits, 1, 64), keys.device(),
                                  launch.stream());
  return {keys_out, values_out};
}

KeyRuns sum_runs(const DeviceArray& sorted_keys, const DeviceArray& values) {
  const std::int64_t n = sorted_keys.numel();
  KeyRuns runs{DeviceArray::empty({n}, ScalarType::Int64, sorted_keys.device()),
               DeviceArray::empty({n}, values.dtype(), sorted_keys.device()),
               DeviceArray::empty({1}, ScalarType::Int64, sorted_keys.device())};
  if (n == 0) {
    fill_(runs.count, Scalar::from_int(0));
    return runs;
  }
  KernelLaunch launch(runs.keys, runs.sums, runs.count, sorted_keys, values);
  const auto reduce_by_key = [&](auto value_tag) {
    using V = typename decltype(value_tag)::type;
    std::size_t bytes = 0;
    const auto run = [&](void* temp) {
      ADCUDA_CHECK(cub::DeviceReduce::ReduceByKey(temp, bytes, sorted_keys.data<std::int64_t>(),
                                                  runs.keys.data<std::int64_t>(), values.data<V>(), runs.sums.data<V>(),
                                                  runs.count.data<std::int64_t>(), cuda::std::plus<>{}, n,
                                                  launch.stream()));
    };
    run(nullptr);
    const DeviceArray temp = scratch(bytes, sorted_keys.device());
    run(temp.data_ptr());
  };
  switch (values.dtype()) {
    case ScalarType::Float32: reduce_by_key(TypeTag<float>{}); break;
    case ScalarType::Float64: reduce_by_key(TypeTag<double>{}); break;
    case ScalarType::Int64: reduce_by_key(TypeTag<std::int64_t>{}); break;
    default:
      throw std::invalid_argument(std::string("sum_runs: values must be float32, float64 or int64, got ") +
                                  scalar_type_name(values.dtype()));
  }
  return runs;
}

}  // namespace adcuda
