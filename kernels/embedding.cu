// Embedding forward (a row gather that checks its indices on the device) and a deterministic backward
// (sort, find runs, one warp per weight row summing its gradient rows in index order). See embedding.h.
#include "embedding.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "elementwise_loops.cuh"
#include "runtime/copy.h"
#include "runtime/device_errors.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"
#include "sort.h"

namespace adcuda {

namespace {

// ---------------------------------------------------------------------------------------------------
// forward

template <typename F>
void dispatch_index(ScalarType type, const char* op, F&& f) {
  switch (type) {
    case ScalarType::Int32: f(TypeTag<std::int32_t>{}); return;
    case ScalarType::Int64: f(TypeTag<std::int64_t>{}); return;
    default:
      throw std::invalid_argument(std::string(op) + ": indices must be int32 or int64, got " + scalar_type_name(type));
  }
}

// Groups of 2^group_shift lanes (at most a warp) copy one row each, so short rows still keep every lane
// busy. An index outside [0, num_embeddings) is reported through `report` (raised at the next
// synchronising call, runtime/device_errors.h) and its row written as zeros, never read.
template <typename Unit, typename Index>
__global__ void embedding_gather_kernel(Unit* out, const Unit* weight, const Index* indices, std::int64_t rows,
                                        std::int64_t units_per_row, std::int64_t weight_row_stride,
                                        std::int64_t num_embeddings, int group_shift,
                                        const DeviceErrorReport report) {
  const int member = threadIdx.x & ((1 << group_shift) - 1);
  const std::int64_t group_size = std::int64_t(1) << group_shift;
  const std::int64_t rows_per_block = blockDim.x >> group_shift;
  for (std::int64_t row = blockIdx.x * rows_per_block + (threadIdx.x >> group_shift); row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
    const auto k = static_cast<std::int64_t>(indices[row]);
    Unit* destination = out + row * units_per_row;
    if (k < 0 || k >= num_embeddings) {
      if (member == 0) report_device_error(report, k, num_embeddings);
      for (std::int64_t u = member; u < units_per_row; u += group_size) destination[u] = Unit{};
      continue;
    }
    const Unit* source = weight + k * weight_row_stride;
    for (std::int64_t u = member; u < units_per_row; u += group_size) destination[u] = source[u];
  }
}

int move_unit_bytes(const DeviceArray& weight, const DeviceArray& out) {
  const auto itemsize = static_cast<std::int64_t>(weight.itemsize());
  const std::int64_t row_bytes = weight.shape()[1] * itemsize;
  const std::int64_t stride_bytes = weight.strides()[0] * itemsize;
  const auto weight_address = reinterpret_cast<std::uintptr_t>(weight.data_ptr());
  const auto out_address = reinterpret_cast<std::uintptr_t>(out.data_ptr());
  for (const int bytes : {16, 8, 4, 2}) {
    if (bytes >= itemsize && row_bytes % bytes == 0 && stride_bytes % bytes == 0 && weight_address % bytes == 0 &&
        out_address % bytes == 0) {
      return bytes;
    }
  }
  return static_cast<int>(itemsize);
}

// ---------------------------------------------------------------------------------------------------
// backward

// The sort key of each gradient row: the weight row it adds to, or num_embeddings ("nowhere", sorted
// last) for the padding row and for an index outside the table.
template <typename Index>
__global__ void embedding_keys_kernel(const Index* indices, std::int64_t n, std::int64_t num_embeddings,
                                      std::int64_t padding_idx, std::int64_t* keys, std::int64_t* positions) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const auto k = static_cast<std::int64_t>(indices[i]);
    keys[i] = (k < 0 || k >= num_embeddings || k == padding_idx) ? num_embeddings : k;
    positions[i] = i;
  }
}

// bounds[2k], bounds[2k + 1]: where the run of key k starts and ends in the sorted keys (both 0 when k
// does not occur; the array is zeroed first). One writer per entry: no atomics.
__global__ void embedding_run_bounds_kernel(const std::int64_t* sorted_keys, std::int64_t n,
                                            std::int64_t num_embeddings, std::int64_t* bounds) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const std::int64_t k = sorted_keys[i];
    if (k >= num_embeddings) continue;
    if (i == 0 || sorted_keys[i - 1] != k) bounds[2 * k] = i;
    if (i == n - 1 || sorted_keys[i + 1] != k) bounds[2 * k + 1] = i + 1;
  }
}

constexpr int kColumnsPerLane = 4;
constexpr int kRowsAhead = 4;

// One warp per weight row: for each tile of 32 * kColumnsPerLane columns, the gradient rows of the row's
// run are added one after the other (positions ascending, as the stable sort left them), kRowsAhead rows
// loaded before they are added so that loads overlap; then the row is written once.
template <typename T>
__global__ void embedding_sum_rows_kernel(T* grad_weight, const T* grad, const std::int64_t* positions,
                                          const std::int64_t* bounds, std::int64_t num_embeddings, std::int64_t dim,
                                          bool scale_grad_by_freq) {
  using Acc = compute_t<T>;
  constexpr std::int64_t kTile = 32 * kColumnsPerLane;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps_per_block = blockDim.x >> 5;
  for (std::int64_t row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < num_embeddings;
       row += static_cast<std::int64_t>(gridDim.x) * warps_per_block) {
    const std::int64_t begin = bounds[2 * row];
    const std::int64_t end = bounds[2 * row + 1];
    const bool divide = scale_grad_by_freq && end > begin;
    const Acc count = static_cast<Acc>(end - begin);
    T* destination = grad_weight + row * dim;
    for (std::int64_t tile = 0; tile < dim; tile += kTile) {
      Acc sum[kColumnsPerLane];
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) sum[c] = Acc(0);
      for (std::int64_t j = begin; j < end; j += kRowsAhead) {
        Acc value[kRowsAhead][kColumnsPerLane];
#pragma unroll
        for (int a = 0; a < kRowsAhead; ++a) {
          const bool live = j + a < end;
          const std::int64_t source = live ? positions[j + a] * dim : 0;
#pragma unroll
          for (int c = 0; c < kColumnsPerLane; ++c) {
            const std::int64_t column = tile + lane + 32 * c;
            value[a][c] = live && column < dim ? to_compute(grad[source + column]) : Acc(0);
          }
        }
#pragma unroll
        for (int a = 0; a < kRowsAhead; ++a) {
          if (j + a < end) {
#pragma unroll
            for (int c = 0; c < kColumnsPerLane; ++c) sum[c] += value[a][c];
          }
        }
      }
#pragma unroll
      for (int c = 0; c < kColumnsPerLane; ++c) {
        const std::int64_t column = tile + lane + 32 * c;
        if (column < dim) destination[column] = convert<T>(divide ? sum[c] / count : sum[c]);
      }
    }
  }
}

// Bits that hold every key up to `largest` (the radix sort compares only those).
int key_bits(std::int64_t largest) {
  int bits = 1;
  while (bits < 63 && (largest >> bits) != 0) ++bits;
  return bits;
}

}  // namespace

DeviceArray embedding(const DeviceArray& weight, const DeviceArray& indices) {
  const char* op = "embedding";
  require(weight.ndim() == 2, op, "weight must be 2-D (num_embeddings, embedding_dim), got shape " +
                                      format_dims(weight.shape()));
  require(weight.shape()[1] <= 1 || weight.strides()[1] == 1, op, "the weight's rows must be contiguous");
  require(indices.is_contiguous(), op, "indices must be contiguous");
  require(weight.device() == indices.device(), op, "weight and indices must be on one device");
  const std::int64_t num_embeddings = weight.shape()[0];
  const std::int64_t dim = weight.shape()[1];
  Dims shape = indices.shape();
  shape.push_back(dim);
  DeviceArray out = DeviceArray::empty(shape, weight.dtype(), weight.device());
  const std::int64_t rows = indices.numel();
  if (rows == 0) return out;

  const DeviceErrorReport report = device_error_report(weight.device(), DeviceCheck::kEmbeddingIndex);
  {
    KernelLaunch launch(out, weight, indices);
    const int unit = move_unit_bytes(weight, out);
    const std::int64_t units_per_row = dim * static_cast<std::int64_t>(weight.itemsize()) / unit;
    const std::int64_t row_stride = weight.strides()[0] * static_cast<std::int64_t>(weight.itemsize()) / unit;
    int group_shift = 0;
    while (group_shift < 5 && (std::int64_t(1) << group_shift) < units_per_row) ++group_shift;
    const int rows_per_block = kBlockSize >> group_shift;
    dispatch_index(indices.dtype(), op, [&](auto index_tag) {
      using Index = typename decltype(index_tag)::type;
      dispatch_move_unit(unit, [&](auto unit_tag) {
        using Unit = typename decltype(unit_tag)::type;
        embedding_gather_kernel<Unit, Index><<<grid_size(rows, rows_per_block), kBlockSize, 0, launch.stream()>>>(
            static_cast<Unit*>(out.data_ptr()), static_cast<const Unit*>(weight.data_ptr()), indices.data<Index>(),
            rows, units_per_row, row_stride, num_embeddings, group_shift, report);
      });
    });
    ADCUDA_CHECK_LAUNCH();
  }
  return out;
}

DeviceArray embedding_backward(const DeviceArray& grad, const DeviceArray& indices, std::int64_t num_embeddings,
                               std::int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "embedding_backward";
  require(is_floating_point(grad.dtype()), op,
          std::string("grad must be floating point, got ") + scalar_type_name(grad.dtype()));
  require(grad.is_contiguous() && indices.is_contiguous(), op, "grad and indices must be contiguous");
  require(grad.device() == indices.device(), op, "grad and indices must be on one device");
  require(num_embeddings >= 0, op, "num_embeddings must be >= 0, got " + std::to_string(num_embeddings));
  require(grad.ndim() == indices.ndim() + 1 &&
              Dims(grad.shape().begin(), grad.shape().end() - 1) == indices.shape(),
          op, "grad of shape " + format_dims(grad.shape()) + " does not fit indices of shape " +
                  format_dims(indices.shape()) + " (expected indices.shape + (embedding_dim,))");
  const std::int64_t dim = grad.shape().back();
  DeviceArray out = DeviceArray::empty({num_embeddings, dim}, grad.dtype(), grad.device());
  if (out.numel() == 0) return out;
  const std::int64_t n = indices.numel();
  KernelLaunch launch(out, grad, indices);
  const cudaStream_t stream = launch.stream();
  if (n == 0) {
    ADCUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
    return out;
  }

  DeviceArray keys = DeviceArray::empty({n}, ScalarType::Int64, grad.device());
  DeviceArray positions = DeviceArray::empty({n}, ScalarType::Int64, grad.device());
  dispatch_index(indices.dtype(), op, [&](auto index_tag) {
    using Index = typename decltype(index_tag)::type;
    embedding_keys_kernel<Index><<<grid_size(n), kBlockSize, 0, stream>>>(
        indices.data<Index>(), n, num_embeddings, padding_idx, keys.data<std::int64_t>(),
        positions.data<std::int64_t>());
  });
  ADCUDA_CHECK_LAUNCH();
  const std::pair<DeviceArray, DeviceArray> sorted = sort_pairs(keys, positions, key_bits(num_embeddings));
  const DeviceArray& sorted_keys = sorted.first;
  const DeviceArray& sorted_positions = sorted.second;

  DeviceArray bounds = DeviceArray::empty({2 * num_embeddings}, ScalarType::Int64, grad.device());
  ADCUDA_CHECK(cudaMemsetAsync(bounds.data_ptr(), 0, bounds.nbytes(), stream));
  embedding_run_bounds_kernel<<<grid_size(n), kBlockSize, 0, stream>>>(sorted_keys.data<std::int64_t>(), n,
                                                                       num_embeddings, bounds.data<std::int64_t>());
  ADCUDA_CHECK_LAUNCH();

  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    embedding_sum_rows_kernel<T><<<grid_size(num_embeddings * 32), kBlockSize, 0, stream>>>(
        out.data<T>(), grad.data<T>(), sorted_positions.data<std::int64_t>(), bounds.data<std::int64_t>(),
        num_embeddings, dim, scale_grad_by_freq);
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace adcuda
