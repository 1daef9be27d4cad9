// cat, tril and triu. Both only move bytes, so their kernels are instantiated per element size, not
// per dtype.
#include "layout.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "elementwise_loops.cuh"
#include "runtime/copy.h"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {

namespace {

// ---------------------------------------------------------------------------------------------------
// cat: out viewed as (rows, total_cols); part i fills columns [col_offset, col_offset + cols). Sizes
// are in units of the widest move (up to 16 bytes) that every pointer and size of the batch allows.
constexpr int kCatBatch = 64;

struct CatPart {
  const void* src;
  std::int64_t cols;
  std::int64_t col_offset;
  FastDivmod cols_divider;  // valid when rows * cols < 2^31
};

struct CatBatch {
  CatPart parts[kCatBatch];
  std::int64_t rows;
  std::int64_t total_cols;
};

template <typename Unit>
__global__ void cat_kernel(Unit* out, const CatBatch batch) {
  const CatPart& part = batch.parts[blockIdx.y];
  const Unit* src = static_cast<const Unit*>(part.src);
  const std::int64_t n = batch.rows * part.cols;
  if (n <= kInt32Limit) {
    ADCUDA_GRID_STRIDE_LOOP(e, n) {
      const auto linear = static_cast<std::uint32_t>(e);
      const std::uint32_t row = part.cols_divider.divide(linear);
      const std::uint32_t col = linear - row * part.cols_divider.divisor;
      out[static_cast<std::int64_t>(row) * batch.total_cols + part.col_offset + col] = src[e];
    }
  } else {
    ADCUDA_GRID_STRIDE_LOOP(e, n) {
      const std::int64_t row = e / part.cols;
      out[row * batch.total_cols + part.col_offset + (e - row * part.cols)] = src[e];
    }
  }
}

struct CatJob {
  const DeviceArray* array;
  std::int64_t col_offset;  // in elements
};

void launch_cat_batch(const DeviceArray& out, const std::vector<CatJob>& jobs, std::int64_t rows,
                      std::int64_t total_cols, cudaStream_t stream) {
  const auto itemsize = static_cast<std::uint64_t>(out.itemsize());
  const auto address = [](const DeviceArray& a) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.data_ptr())); };
  // the widest unit dividing every address and byte count of the batch
  std::uint64_t common = address(out) | static_cast<std::uint64_t>(total_cols) * itemsize;
  for (const CatJob& job : jobs) {
    common |= address(*job.array) | static_cast<std::uint64_t>(job.col_offset) * itemsize |
              static_cast<std::uint64_t>(job.array->numel() / rows) * itemsize;
  }
  std::uint64_t unit = 16;
  while (unit > itemsize && common % unit != 0) unit /= 2;
  const auto scale = static_cast<std::int64_t>(unit / itemsize);

  CatBatch batch{};
  batch.rows = rows;
  batch.total_cols = total_cols / scale;
  std::int64_t most = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::int64_t cols = jobs[i].array->numel() / rows / scale;
    const auto divisor = static_cast<std::uint32_t>(std::min(cols, kInt32Limit));
    batch.parts[i] = {jobs[i].array->data_ptr(), cols, jobs[i].col_offset / scale, FastDivmod(divisor)};
    most = std::max(most, rows * cols);
  }
  const dim3 grid(grid_size(most), static_cast<unsigned>(jobs.size()));
  switch (unit) {
    case 16: cat_kernel<uint4><<<grid, kBlockSize, 0, stream>>>(static_cast<uint4*>(out.data_ptr()), batch); break;
    case 8: cat_kernel<uint2><<<grid, kBlockSize, 0, stream>>>(static_cast<uint2*>(out.data_ptr()), batch); break;
    case 4: cat_kernel<std::uint32_t><<<grid, kBlockSize, 0, stream>>>(out.data<std::uint32_t>(), batch); break;
    case 2: cat_kernel<std::uint16_t><<<grid, kBlockSize, 0, stream>>>(out.data<std::uint16_t>(), batch); break;
    default: cat_kernel<std::uint8_t><<<grid, kBlockSize, 0, stream>>>(out.data<std::uint8_t>(), batch); break;
  }
  ADCUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------------------
// tril / triu: out (contiguous) keeps in's element where (col - row) is on the kept side of k.
template <typename T>
__global__ void triangle_kernel(T* out, const T* in, std::int32_t n, FastIndexer<2> indexer, FastDivmod cols,
                                FastDivmod rows, std::int64_t k, bool lower) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    const auto linear = static_cast<std::uint32_t>(i);
    std::int32_t offsets[2];
    indexer.offsets(linear, offsets);
    const std::uint32_t q = cols.divide(linear);
    const std::int64_t col = linear - q * cols.divisor;
    const std::int64_t row = q - rows.divide(q) * rows.divisor;
    const bool keep = lower ? col - row <= k : col - row >= k;
    out[offsets[0]] = keep ? in[offsets[1]] : T(0);
  }
}

// The same for arrays whose counts or offsets exceed int32.
template <typename T>
__global__ void triangle_wide_kernel(T* out, const T* in, std::int64_t n, StridedIndexer<2, std::int64_t> indexer,
                                     std::int64_t cols, std::int64_t rows, std::int64_t k, bool lower) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    std::int64_t offsets[2];
    indexer.offsets(i, offsets);
    const std::int64_t col = i % cols;
    const std::int64_t row = (i / cols) % rows;
    const bool keep = lower ? col - row <= k : col - row >= k;
    out[offsets[0]] = keep ? in[offsets[1]] : T(0);
  }
}

template <typename T>
void launch_triangle(const DeviceArray& out, const DeviceArray& a, std::int64_t k, bool lower, cudaStream_t stream) {
  const std::int64_t n = out.numel();
  const std::int64_t cols = a.shape()[a.ndim() - 1];
  const std::int64_t rows = a.shape()[a.ndim() - 2];
  // k beyond either side only decides all-or-nothing; clamping keeps the comparisons in range
  k = std::clamp<std::int64_t>(k, -rows - 1, cols + 1);
  if (fits_int32_indexing(out, a)) {
    const FastIndexer<2> indexer(make_strided_indexer<2, std::int32_t>(out.shape(), {&out.strides(), &a.strides()}));
    triangle_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
        out.data<T>(), static_cast<const T*>(a.data_ptr()), static_cast<std::int32_t>(n), indexer,
        FastDivmod(static_cast<std::uint32_t>(cols)), FastDivmod(static_cast<std::uint32_t>(rows)), k, lower);
  } else {
    const auto indexer = make_strided_indexer<2, std::int64_t>(out.shape(), {&out.strides(), &a.strides()});
    triangle_wide_kernel<T><<<grid_size(n), kBlockSize, 0, stream>>>(
        out.data<T>(), static_cast<const T*>(a.data_ptr()), n, indexer, cols, rows, k, lower);
  }
  ADCUDA_CHECK_LAUNCH();
}

DeviceArray triangle(const char* op, const DeviceArray& a, std::int64_t k, bool lower) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(std::string(op) + ": needs at least 2 dims, got shape " + format_dims(a.shape()));
  }
  DeviceArray out = DeviceArray::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() == 0) return out;
  KernelLaunch launch(out, a);
  switch (a.itemsize()) {
    case 1: launch_triangle<std::uint8_t>(out, a, k, lower, launch.stream()); break;
    case 2: launch_triangle<std::uint16_t>(out, a, k, lower, launch.stream()); break;
    case 4: launch_triangle<std::uint32_t>(out, a, k, lower, launch.stream()); break;
    default: launch_triangle<std::uint64_t>(out, a, k, lower, launch.stream()); break;
  }
  return out;
}

}  // namespace

DeviceArray cat(const std::vector<DeviceArray>& arrays, std::int64_t axis) {
  if (arrays.empty()) throw std::invalid_argument("cat: expected a non-empty list of arrays");
  const DeviceArray& first = arrays.front();
  const int ndim = first.ndim();
  if (axis < 0 || axis >= ndim) {
    throw std::invalid_argument("cat: axis " + std::to_string(axis) + " out of range for shape " +
                                format_dims(first.shape()));
  }
  Dims shape = first.shape();
  shape[axis] = 0;
  for (const DeviceArray& a : arrays) {
    bool matches = a.ndim() == ndim && a.device() == first.device();
    for (int d = 0; d < ndim && matches; ++d) matches = d == axis || a.shape()[d] == first.shape()[d];
    if (!matches) {
      throw std::invalid_argument("cat: arrays must match in every dim but " + std::to_string(axis) +
                                  " and be on one device; got shapes " + format_dims(first.shape()) + " and " +
                                  format_dims(a.shape()));
    }
    shape[axis] += a.shape()[axis];
  }
  DeviceArray out = DeviceArray::empty(shape, first.dtype(), first.device());
  if (out.numel() == 0) return out;

  std::int64_t rows = 1;
  for (std::int64_t d = 0; d < axis; ++d) rows *= shape[d];
  std::int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < ndim; ++d) inner *= shape[d];
  const std::int64_t total_cols = shape[axis] * inner;

  KernelLaunch launch(out);
  std::vector<CatJob> batch;
  std::int64_t start = 0;
  for (const DeviceArray& a : arrays) {
    const std::int64_t part_start = start;
    start += a.shape()[axis];
    if (a.numel() == 0) continue;
    if (a.dtype() == out.dtype() && a.is_contiguous()) {
      a.storage()->use_on(launch.stream(), launch.device());
      batch.push_back({&a, part_start * inner});
      if (batch.size() == kCatBatch) {
        launch_cat_batch(out, batch, rows, total_cols, launch.stream());
        batch.clear();
      }
    } else {
      Dims strides = out.strides();
      copy_(out.as_strided(a.shape(), strides, out.offset() + part_start * strides[axis]), a);
    }
  }
  if (!batch.empty()) launch_cat_batch(out, batch, rows, total_cols, launch.stream());
  return out;
}

DeviceArray tril(const DeviceArray& a, std::int64_t k) { return triangle("tril", a, k, true); }
DeviceArray triu(const DeviceArray& a, std::int64_t k) { return triangle("triu", a, k, false); }

}  // namespace adcuda
