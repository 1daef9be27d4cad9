// What a kernel file needs to launch work on DeviceArrays (for .cu files only):
//
//   DeviceArray out = DeviceArray::empty(a.shape(), a.dtype(), a.device());
//   KernelLaunch launch(out, a);             // a's device made current; the thread's current stream,
//                                            // ordered after a's and out's earlier uses elsewhere
//   if (fits_int32_indexing(out, a)) { ... StridedIndexer<2, std::int32_t> ... } else { ... int64 ... }
//   my_kernel<<<grid_size(n), kBlockSize, 0, launch.stream()>>>(...);
//   ADCUDA_CHECK_LAUNCH();
//
// Kernels loop with ADCUDA_GRID_STRIDE_LOOP over int64 element counts, so any size launches.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "runtime/device_array.h"
#include "runtime/errors.h"
#include "runtime/stream.h"

namespace adcuda {

constexpr int kBlockSize = 256;
constexpr int kMaxDims = 8;

// Blocks for `n` elements at `block` threads each (at least 1; grid-stride loops cover the rest past
// the cap).
inline unsigned int grid_size(std::int64_t n, int block = kBlockSize) {
  constexpr std::int64_t kMaxBlocks = std::int64_t(1) << 24;
  return static_cast<unsigned int>(std::clamp<std::int64_t>((n + block - 1) / block, 1, kMaxBlocks));
}

#define ADCUDA_GRID_STRIDE_LOOP(i, n)                                                                   \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Makes the arrays' device current and picks the calling thread's current stream on it, after
// ordering that stream behind every earlier use of each array on other streams (and recording it as
// their latest user). Every operand of a launch, outputs included, must be passed.
class KernelLaunch {
 public:
  template <typename... Arrays>
  explicit KernelLaunch(const DeviceArray& first, const Arrays&... rest)
      : guard_(common_device(first, rest...)), device_(first.device()), stream_(current_stream(device_)) {
    first.storage()->use_on(stream_, device_);
    (rest.storage()->use_on(stream_, device_), ...);
  }
  cudaStream_t stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }

 private:
  template <typename... Arrays>
  static int common_device(const DeviceArray& first, const Arrays&... rest) {
    const int device = first.device();
    if (((rest.device() != device) || ...)) {
      throw std::invalid_argument("kernel launch: operands are on different CUDA devices (cuda:" +
                                  std::to_string(device) + " and others); move them to one device first");
    }
    return device;
  }

  DeviceGuard guard_;
  int device_;
  cudaStream_t stream_;
};

// Whether every element count and element offset of the arrays fits in int32, so kernels may index
// with 32-bit arithmetic (much cheaper divisions than int64).
template <typename... Arrays>
bool fits_int32_indexing(const Arrays&... arrays) {
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  auto fits = [](const DeviceArray& a) {
    const auto [lowest, end] = a.extent();
    return a.numel() <= limit && lowest - a.offset() >= -limit && end - a.offset() <= limit;
  };
  return (fits(arrays) && ...);
}

// Element offsets (relative to each operand's data_ptr()) of NArgs operands that share one shape,
// from a linear row-major index. Dims that all operands can merge are merged first, and size-1 dims
// dropped, so most layouts need one or two dims.
template <int NArgs, typename index_t>
struct StridedIndexer {
  int ndim = 0;
  index_t sizes[kMaxDims] = {};
  index_t strides[kMaxDims][NArgs] = {};

  __host__ __device__ __forceinline__ void offsets(index_t linear, index_t (&out)[NArgs]) const {
#pragma unroll
    for (int arg = 0; arg < NArgs; ++arg) out[arg] = 0;
    for (int dim = ndim - 1; dim >= 0; --dim) {
      const index_t size = sizes[dim];
      const index_t coordinate = linear % size;
      linear /= size;
#pragma unroll
      for (int arg = 0; arg < NArgs; ++arg) out[arg] += coordinate * strides[dim][arg];
    }
  }
};

// `shape` is the common shape; `strides[k]` the k-th operand's strides (elements) for it (0 where it is
// broadcast). Throws std::invalid_argument when more than kMaxDims dims remain after merging.
template <int NArgs, typename index_t>
StridedIndexer<NArgs, index_t> make_strided_indexer(const Dims& shape, const std::array<const Dims*, NArgs>& strides) {
  // Innermost first while merging.
  std::int64_t sizes[64];
  std::int64_t merged[64][NArgs];
  int count = 0;
  if (shape.size() > 64) throw std::invalid_argument("StridedIndexer: more than 64 dims");
  for (int dim = static_cast<int>(shape.size()) - 1; dim >= 0; --dim) {
    if (shape[dim] == 1) continue;
    bool mergeable = count > 0;
    for (int arg = 0; arg < NArgs && mergeable; ++arg) {
      mergeable = (*strides[arg])[dim] == merged[count - 1][arg] * sizes[count - 1];
    }
    if (mergeable) {
      sizes[count - 1] *= shape[dim];
      continue;
    }
    sizes[count] = shape[dim];
    for (int arg = 0; arg < NArgs; ++arg) merged[count][arg] = (*strides[arg])[dim];
    ++count;
  }
  if (count > kMaxDims) {
    throw std::invalid_argument("StridedIndexer: shape " + format_dims(shape) + " still has " + std::to_string(count) +
                                " dims after merging, more than the " + std::to_string(kMaxDims) +
                                " kernels index; make the operands contiguous first");
  }
  StridedIndexer<NArgs, index_t> indexer;
  indexer.ndim = count;
  for (int i = 0; i < count; ++i) {
    const int dim = count - 1 - i;
    indexer.sizes[dim] = static_cast<index_t>(sizes[i]);
    for (int arg = 0; arg < NArgs; ++arg) indexer.strides[dim][arg] = static_cast<index_t>(merged[i][arg]);
  }
  return indexer;
}

}  // namespace adcuda
