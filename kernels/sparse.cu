// Sparse COO/CSR products: COO -> CSR (a stable radix sort of the rows, then row pointers from the run
// boundaries), CSR x dense (SpMM, one warp per row) and its value gradient (SDDMM, one warp per entry).
// See sparse.h.
#include "sparse.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "elementwise_loops.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"
#include "sort.h"

namespace adcuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kColumnsPerLane = 4;  // a lane's accumulators: 128 dense columns per pass over a row
constexpr int kWarpsPerBlock = kBlockSize / 32;

__global__ void positions_kernel(std::int64_t* positions, std::int64_t n) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) { positions[i] = i; }
}

// row_ptr[r] = the first entry whose (sorted) row is >= r. Entry k writes the pointers of the rows
// after its predecessor's row up to its own (k == nnz: up to n_rows), so each pointer has one writer
// and empty rows get their successor's start.
__global__ void row_ptr_kernel(const std::int64_t* sorted_rows, std::int64_t nnz, std::int64_t n_rows,
                               std::int64_t* row_ptr) {
  ADCUDA_GRID_STRIDE_LOOP(k, nnz + 1) {
    const std::int64_t previous = k == 0 ? -1 : sorted_rows[k - 1];
    const std::int64_t current = k == nnz ? n_rows : sorted_rows[k];
    for (std::int64_t r = previous + 1; r <= current; ++r) row_ptr[r] = k;
  }
}

template <typename T>
__global__ void spmm_kernel(T* out, const std::int64_t* row_ptr, const std::int64_t* order, const std::int64_t* cols,
                            const T* values, const T* dense, std::int64_t n_rows, std::int64_t width,
                            std::int64_t dense_row_stride, std::int64_t dense_column_stride) {
  using Acc = compute_t<T>;
  constexpr std::int64_t kTile = 32 * kColumnsPerLane;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps_per_block = blockDim.x >> 5;
  for (std::int64_t row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < n_rows;
       row += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const std::int64_t begin = row_ptr[row];
    const std::int64_t end = row_ptr[row + 1];
    T* destination = out + row * width;
    for (std::int64_t tile = 0; tile < width; tile += kTile) {
      Acc sum[kColumnsPerLane];
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) sum[c] = Acc(0);
      for (std::int64_t batch = begin; batch < end; batch += 32) {
        // the warp loads up to 32 entries at once (one per lane), then takes them one by one from the
        // lane that holds it: each entry's column and value are read from memory once per tile
        std::int64_t column = 0;
        Acc value = Acc(0);
        if (batch + lane < end) {
          const std::int64_t entry = order != nullptr ? order[batch + lane] : batch + lane;
          column = cols[entry];
          value = to_compute(values[entry]);
        }
        const int count = end - batch < 32 ? static_cast<int>(end - batch) : 32;
        for (int t = 0; t < count; ++t) {
          const std::int64_t source_row = __shfl_sync(kFullMask, column, t);
          const Acc weight = __shfl_sync(kFullMask, value, t);
          const T* source = dense + source_row * dense_row_stride;
#pragma unroll
          for (int c = 0; c < kColumnsPerLane; ++c) {
            const std::int64_t j = tile + lane + 32 * c;
            if (j < width) sum[c] += weight * to_compute(source[j * dense_column_stride]);
          }
        }
      }
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) {
        const std::int64_t j = tile + lane + 32 * c;
        if (j < width) destination[j] = convert<T>(sum[c]);
      }
    }
  }
}

template <typename T>
__global__ void sddmm_kernel(T* out, const std::int64_t* rows, const std::int64_t* cols, const T* a, const T* b,
                             std::int64_t nnz, std::int64_t width, std::int64_t a_row_stride,
                             std::int64_t a_column_stride, std::int64_t b_row_stride, std::int64_t b_column_stride) {
  using Acc = compute_t<T>;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps_per_block = blockDim.x >> 5;
  for (std::int64_t k = blockIdx.x * warps_per_block + (threadIdx.x >> 5); k < nnz;
       k += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const T* x = a + rows[k] * a_row_stride;
    const T* y = b + cols[k] * b_row_stride;
    Acc sum = Acc(0);
    for (std::int64_t j = lane; j < width; j += 32) {
      sum += to_compute(x[j * a_column_stride]) * to_compute(y[j * b_column_stride]);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
    if (lane == 0) out[k] = convert<T>(sum);
  }
}

void require_index_vector(const DeviceArray& a, const char* op, const char* name) {
  require(a.dtype() == ScalarType::Int64 && a.ndim() == 1 && a.is_contiguous(), op,
          std::string(name) + " must be a contiguous 1-D int64 array, got " + scalar_type_name(a.dtype()) + " " +
              format_dims(a.shape()));
}

// Bits that hold every key below `bound` (the radix sort compares only those).
int key_bits(std::int64_t bound) {
  int bits = 1;
  while (bits < 63 && (bound >> bits) != 0) ++bits;
  return bits;
}

}  // namespace

std::pair<DeviceArray, std::optional<DeviceArray>> coo_to_csr(const DeviceArray& rows, std::int64_t n_rows,
                                                              bool rows_sorted) {
  const char* op = "coo_to_csr";
  require_index_vector(rows, op, "rows");
  require(n_rows >= 0, op, "n_rows must be >= 0, got " + std::to_string(n_rows));
  const std::int64_t nnz = rows.numel();
  DeviceArray row_ptr = DeviceArray::empty({n_rows + 1}, ScalarType::Int64, rows.device());
  KernelLaunch launch(row_ptr, rows);
  const cudaStream_t stream = launch.stream();
  const auto fill_row_ptr = [&](const DeviceArray& sorted_rows) {
    row_ptr_kernel<<<grid_size(nnz + 1), kBlockSize, 0, stream>>>(sorted_rows.data<std::int64_t>(), nnz, n_rows,
                                                                    row_ptr.data<std::int64_t>());
    ADCUDA_CHECK_LAUNCH();
  };
  if (rows_sorted) {
    fill_row_ptr(rows);
    return {row_ptr, std::nullopt};
  }
  DeviceArray positions = DeviceArray::empty({nnz}, ScalarType::Int64, rows.device());
  if (nnz == 0) {
    fill_row_ptr(rows);
    return {row_ptr, positions};
  }
  positions_kernel<<<grid_size(nnz), kBlockSize, 0, stream>>>(positions.data<std::int64_t>(), nnz);
  ADCUDA_CHECK_LAUNCH();
  const std::pair<DeviceArray, DeviceArray> sorted = sort_pairs(rows, positions, key_bits(n_rows));
  fill_row_ptr(sorted.first);
  return {row_ptr, sorted.second};
}

DeviceArray spmm(const DeviceArray& row_ptr, const std::optional<DeviceArray>& order, const DeviceArray& cols,
                 const DeviceArray& values, const DeviceArray& dense) {
  const char* op = "spmm";
  require_index_vector(row_ptr, op, "row_ptr");
  require_index_vector(cols, op, "cols");
  if (order) require_index_vector(*order, op, "order");
  require(values.ndim() == 1 && values.numel() == cols.numel() && dense.ndim() == 2, op,
          "expected 1-D cols and values of one length and a 2-D dense matrix, got cols " + format_dims(cols.shape()) +
              ", values " + format_dims(values.shape()) + ", dense " + format_dims(dense.shape()));
  require(values.dtype() == dense.dtype(), op,
          std::string("values (") + scalar_type_name(values.dtype()) + ") and dense (" +
              scalar_type_name(dense.dtype()) + ") must have one dtype");
  require(row_ptr.numel() >= 1, op, "row_ptr must hold n_rows + 1 pointers");
  const std::int64_t n_rows = row_ptr.numel() - 1;
  const std::int64_t width = dense.shape()[1];
  DeviceArray out = DeviceArray::empty({n_rows, width}, values.dtype(), values.device());
  if (out.numel() == 0) return out;
  const DeviceArray& entry_order = order ? *order : row_ptr;  // an operand of the launch when there is one
  KernelLaunch launch(out, row_ptr, entry_order, cols, values, dense);
  dispatch_floating(values.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    spmm_kernel<T><<<grid_size(n_rows, kWarpsPerBlock), kBlockSize, 0, launch.stream()>>>(
        out.data<T>(), row_ptr.data<std::int64_t>(), order ? order->data<std::int64_t>() : nullptr,
        cols.data<std::int64_t>(), values.data<T>(), dense.data<T>(), n_rows, width, dense.strides()[0],
        dense.strides()[1]);
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

DeviceArray sddmm(const DeviceArray& rows, const DeviceArray& cols, const DeviceArray& a, const DeviceArray& b) {
  const char* op = "sddmm";
  require_index_vector(rows, op, "rows");
  require_index_vector(cols, op, "cols");
  require(rows.numel() == cols.numel() && a.ndim() == 2 && b.ndim() == 2 && a.shape()[1] == b.shape()[1], op,
          "expected rows and cols of one length and 2-D a and b with as many columns, got rows " +
              format_dims(rows.shape()) + ", cols " + format_dims(cols.shape()) + ", a " + format_dims(a.shape()) +
              ", b " + format_dims(b.shape()));
  require(a.dtype() == b.dtype(), op,
          std::string("a (") + scalar_type_name(a.dtype()) + ") and b (" + scalar_type_name(b.dtype()) +
              ") must have one dtype");
  const std::int64_t nnz = rows.numel();
  DeviceArray out = DeviceArray::empty({nnz}, a.dtype(), a.device());
  if (nnz == 0) return out;
  KernelLaunch launch(out, rows, cols, a, b);
  dispatch_floating(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    sddmm_kernel<T><<<grid_size(nnz, kWarpsPerBlock), kBlockSize, 0, launch.stream()>>>(
        out.data<T>(), rows.data<std::int64_t>(), cols.data<std::int64_t>(), a.data<T>(), b.data<T>(), nnz,
        a.shape()[1], a.strides()[0], a.strides()[1], b.strides()[0], b.strides()[1]);
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace adcuda
