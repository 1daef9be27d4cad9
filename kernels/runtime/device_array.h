// DeviceArray: the CUDA backend's array (what Tensor._data holds for a CUDA tensor). A shape, strides
// and an offset (in elements) over a Storage, which owns the device memory. Views (reshape, permute,
// expand, slices, flips) are new DeviceArrays over the same Storage: metadata only, no copy.
//
// Stream safety lives in the Storage: it remembers the last stream its memory was used on. A kernel
// that uses the array on another stream first waits for an event recorded on that stream
// (Storage::use_on, called for every operand by KernelLaunch in launch.cuh), so a tensor produced on
// one stream and consumed on another is ordered by an event, never by luck. A launch's use is
// recorded once its work is queued, never before: a consumer on another thread that sees the new
// last stream is ordered behind the producer's kernel, not behind an event that precedes it.
// Streams of other libraries that use the memory (DLPack consumers, __cuda_array_interface__,
// record_stream) are kept as external users: every later use waits for them too. When the last
// DeviceArray goes, the block returns to the caching allocator, which reuses it only after the queued
// work of the last stream and of every external user.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/scalar_type.h"

namespace adcuda {

struct Block;
using Dims = std::vector<std::int64_t>;

// A stream and the device it belongs to.
struct StreamUse {
  cudaStream_t stream;
  int device;
};

class Storage : public std::enable_shared_from_this<Storage> {
 public:
  // `nbytes` of device memory on `device` from the caching allocator, for the thread's current
  // stream on it (nbytes may be 0: no memory, a null pointer).
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, int device);
  // Memory that someone else owns (another library's array). `owner` is released when the storage
  // goes, after the work this runtime queued on the memory has finished. `last_stream` (may be
  // nullptr) is the stream of `device` on which the memory is ready to use.
  static std::shared_ptr<Storage> wrap(void* data, std::size_t nbytes, int device, std::shared_ptr<void> owner,
                                       cudaStream_t last_stream);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  int device() const noexcept { return device_; }
  // False for memory wrapped from another library.
  bool from_allocator() const noexcept { return block_ != nullptr || owner_ == nullptr; }
  // The stream whose queued work used the memory last (nullptr: none yet), and its device.
  std::pair<cudaStream_t, int> last_use() const;
  cudaStream_t last_stream() const { return last_use().first; }
  // Orders `stream` (of `stream_device`) after every earlier use of this memory on another stream
  // (external users included), and records it as the latest user: when the calling thread's launch in
  // progress on `stream` (LaunchInProgress) ends, or at once outside one.
  void use_on(cudaStream_t stream, int stream_device);
  // The two halves of use_on. wait_for_earlier_uses returns what record_use needs to know whether
  // another use was recorded in between (then `stream` is also ordered after that one).
  std::uint64_t wait_for_earlier_uses(cudaStream_t stream, int stream_device);
  void record_use(cudaStream_t stream, int stream_device, std::uint64_t seen) noexcept;
  // A stream of another library that uses the memory (a DLPack consumer, a __cuda_array_interface__
  // consumer, record_stream): ordered after every earlier use now; every later use waits for it, and
  // the allocator reuses the memory only after its queued work.
  void add_external_user(cudaStream_t stream, int stream_device);
  std::vector<StreamUse> external_users() const;

 private:
  Storage(void* data, std::size_t nbytes, int device, Block* block, std::shared_ptr<void> owner,
          cudaStream_t last_stream);

  void* data_;
  std::size_t nbytes_;
  int device_;
  Block* block_;
  std::shared_ptr<void> owner_;
  mutable std::mutex mutex_;
  cudaStream_t last_stream_;
  int last_stream_device_;
  std::uint64_t recorded_uses_ = 0;  // how many uses record_use has recorded
  std::vector<StreamUse> external_users_;
};

// A launch in progress on the calling thread (KernelLaunch in launch.cuh holds one): Storage::use_on
// for its stream waits at once but leaves the recording to it, which records every use when it ends,
// after its work has been queued. Launches nest (a launch may run another while it prepares).
class LaunchInProgress {
 public:
  LaunchInProgress(cudaStream_t stream, int device);
  ~LaunchInProgress();
  LaunchInProgress(const LaunchInProgress&) = delete;
  LaunchInProgress& operator=(const LaunchInProgress&) = delete;

  // The innermost launch in progress on the calling thread with `stream`, or nullptr.
  static LaunchInProgress* on_stream(cudaStream_t stream);
  void defer(std::shared_ptr<Storage> storage, std::uint64_t seen);

 private:
  struct DeferredUse {
    std::shared_ptr<Storage> storage;
    std::uint64_t seen;
  };
  cudaStream_t stream_;
  int device_;
  LaunchInProgress* enclosing_;
  std::vector<DeferredUse> uses_;
};

class DeviceArray {
 public:
  // Validates that the view stays inside the storage (std::invalid_argument otherwise).
  DeviceArray(std::shared_ptr<Storage> storage, Dims shape, Dims strides, std::int64_t offset, ScalarType dtype);

  // A new contiguous array on `device` (-1: the current device), uninitialised.
  static DeviceArray empty(const Dims& shape, ScalarType dtype, int device = -1);

  const Dims& shape() const noexcept { return shape_; }
  const Dims& strides() const noexcept { return strides_; }  // in elements
  std::int64_t offset() const noexcept { return offset_; }   // in elements from the storage's start
  ScalarType dtype() const noexcept { return dtype_; }
  int device() const noexcept { return storage_->device(); }
  int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const noexcept { return numel_; }
  std::size_t itemsize() const noexcept { return adcuda::itemsize(dtype_); }
  std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel_) * itemsize(); }
  // Address of element [0, ..., 0].
  void* data_ptr() const noexcept {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<std::int64_t>(itemsize());
  }
  template <typename T>
  T* data() const noexcept {
    return static_cast<T*>(data_ptr());
  }
  // Row-major with no gaps (dims of size 1 may have any stride), as NumPy's C_CONTIGUOUS.
  bool is_contiguous() const noexcept;
  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }

  // Another view of the same storage.
  DeviceArray as_strided(Dims shape, Dims strides, std::int64_t offset) const;
  // [lowest, highest + 1) element index, from the storage's start, that the array reaches ({offset,
  // offset} when it has no elements).
  std::pair<std::int64_t, std::int64_t> extent() const noexcept;

 private:
  std::shared_ptr<Storage> storage_;
  Dims shape_;
  Dims strides_;
  std::int64_t offset_;
  ScalarType dtype_;
  std::int64_t numel_;
};

// Row-major strides (in elements) for `shape`.
Dims contiguous_strides(const Dims& shape);
// Whether the memory `a` and `b` reach may overlap (compares address ranges, so two storages
// wrapping the same external memory count too).
bool may_overlap(const DeviceArray& a, const DeviceArray& b) noexcept;
// "(2, 3)": shapes in messages.
std::string format_dims(const Dims& dims);

}  // namespace adcuda
