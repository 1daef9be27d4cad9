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
// ordering that stream behind every earlier use of each array on other streams. Every operand of a
// launch, outputs included, must be passed (or given to Storage::use_on while the KernelLaunch lives).
// The stream becomes their latest user when the KernelLaunch goes, after the work it was made for has
// been queued: declare it in the scope of the launches, and let it end right after them.
class KernelLaunch {
 public:
  template <typename... Arrays>
  explicit KernelLaunch(const DeviceArray& first, const Arrays&... rest)
      : guard_(common_device(first, rest...)),
        device_(first.device()),
        stream_(current_stream(device_)),
        in_progress_(stream_, device_) {
    first.storage()->use_on(stream_, device_);
    (rest.storage()->use_on(stream_, device_), ...);
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
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
  LaunchInProgress in_progress_;
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

// The dims of a common `shape` left after merging the ones that every operand can merge (its
// strides[k] for operand k, in elements; 0 where broadcast), innermost first, size-1 dims dropped.
template <int NArgs>
struct MergedDims {
  static constexpr int kCapacity = 64;
  int count = 0;
  std::int64_t sizes[kCapacity];
  std::int64_t strides[kCapacity][NArgs];
};

template <int NArgs>
MergedDims<NArgs> merge_dims(const Dims& shape, const std::array<const Dims*, NArgs>& strides) {
  if (shape.size() > MergedDims<NArgs>::kCapacity) {
    throw std::invalid_argument("StridedIndexer: more than 64 dims in shape " + format_dims(shape));
  }
  MergedDims<NArgs> merged;
  for (int dim = static_cast<int>(shape.size()) - 1; dim >= 0; --dim) {
    if (shape[dim] == 1) continue;
    const int last = merged.count - 1;
    bool mergeable = merged.count > 0;
    for (int arg = 0; arg < NArgs && mergeable; ++arg) {
      mergeable = (*strides[arg])[dim] == merged.strides[last][arg] * merged.sizes[last];
    }
    if (mergeable) {
      merged.sizes[last] *= shape[dim];
      continue;
    }
    merged.sizes[merged.count] = shape[dim];
    for (int arg = 0; arg < NArgs; ++arg) merged.strides[merged.count][arg] = (*strides[arg])[dim];
    ++merged.count;
  }
  return merged;
}

// Throws std::invalid_argument when more than kMaxDims dims remain after merging (split the
// launch along the outer dims then, as copy.cu does).
template <int NArgs, typename index_t>
StridedIndexer<NArgs, index_t> make_strided_indexer(const Dims& shape, const std::array<const Dims*, NArgs>& strides) {
  const MergedDims<NArgs> merged = merge_dims<NArgs>(shape, strides);
  if (merged.count > kMaxDims) {
    throw std::invalid_argument("StridedIndexer: shape " + format_dims(shape) + " still has " +
                                std::to_string(merged.count) + " dims after merging, more than the " +
                                std::to_string(kMaxDims) + " kernels index");
  }
  StridedIndexer<NArgs, index_t> indexer;
  indexer.ndim = merged.count;
  for (int i = 0; i < merged.count; ++i) {
    const int dim = merged.count - 1 - i;
    indexer.sizes[dim] = static_cast<index_t>(merged.sizes[i]);
    for (int arg = 0; arg < NArgs; ++arg) indexer.strides[dim][arg] = static_cast<index_t>(merged.strides[i][arg]);
  }
  return indexer;
}

// Calls launch(part...) on sub-views of `arrays` (one common shape) taken along their outermost dims,
// each indexable by a StridedIndexer (at most kMaxDims dims after merging); a single call when the
// arrays are indexable as they are.
template <typename Launch, typename... Arrays>
void for_each_indexable_part(Launch&& launch, const DeviceArray& first, const Arrays&... rest) {
  constexpr int kArgs = 1 + sizeof...(Arrays);
  if (merge_dims<kArgs>(first.shape(), {&first.strides(), &rest.strides()...}).count <= kMaxDims) {
    launch(first, rest...);
    return;
  }
  auto inner = [](const DeviceArray& a, std::int64_t index) {
    Dims shape(a.shape().begin() + 1, a.shape().end());
    Dims strides(a.strides().begin() + 1, a.strides().end());
    return a.as_strided(std::move(shape), std::move(strides), a.offset() + index * a.strides()[0]);
  };
  for (std::int64_t index = 0; index < first.shape()[0]; ++index) {
    for_each_indexable_part(launch, inner(first, index), inner(rest, index)...);
  }
}

}  // namespace adcuda
