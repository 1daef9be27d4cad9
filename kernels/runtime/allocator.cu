#include "runtime/allocator.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream.h"

#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

#include <memory>
#endif

namespace adcuda {

struct Block {
  int device;
  cudaStream_t stream;        // the stream it is (or was last) allocated for
  std::size_t size;           // its size class
  std::size_t requested;      // what the current owner asked for
  void* pointer;
  cudaEvent_t pending_event;  // while held back for another stream's work
  int pending_event_device;   // the device of that stream (and event)
};

namespace {

constexpr std::size_t kGranularity = 512;
constexpr std::size_t kSmallPoolLimit = std::size_t(1) << 20;

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

bool is_small(std::size_t size) { return size <= kSmallPoolLimit; }

struct DeviceCache {
  std::unordered_map<std::size_t, std::vector<Block*>> free_by_size;
  std::vector<Block*> pending;
  AllocatorStats stats;
};

struct Allocator {
  std::mutex mutex;
  std::vector<DeviceCache> devices;

  DeviceCache& cache(int device) {
    if (devices.size() <= static_cast<std::size_t>(device)) devices.resize(device + 1);
    return devices[device];
  }
};

// Leaked on purpose: Python finalisers free tensors after static destructors may have run.
Allocator& allocator() {
  static Allocator* instance = new Allocator();
  return *instance;
}

void add_reserved(AllocatorStats& stats, std::int64_t size) {
  stats.reserved_bytes += size;
  (is_small(size) ? stats.small_pool_reserved_bytes : stats.large_pool_reserved_bytes) += size;
  stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
}

void add_allocated(AllocatorStats& stats, const Block& block, std::int64_t sign) {
  const auto size = static_cast<std::int64_t>(block.size);
  stats.allocated_bytes += sign * size;
  stats.requested_bytes += sign * static_cast<std::int64_t>(block.requested);
  (is_small(block.size) ? stats.small_pool_allocated_bytes : stats.large_pool_allocated_bytes) += sign * size;
  stats.active_blocks += sign;
  stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, stats.allocated_bytes);
}

// Whether the query says the work is done; false while it runs. Clears the "not ready" status the
// runtime may also keep as the thread's last error.
bool work_done(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw_cuda_error(static_cast<int>(status), call, __FILE__, __LINE__);
}

void make_reusable(DeviceCache& cache, Block* block) {
  cache.free_by_size[block->size].push_back(block);
  cache.stats.cached_blocks += 1;
}

// Pending blocks whose event has completed become reusable.
void process_pending(DeviceCache& cache, int device) {
  auto still_pending = cache.pending.begin();
  for (Block* block : cache.pending) {
    if (work_done(cudaEventQuery(block->pending_event), "cudaEventQuery(block->pending_event)")) {
      release_event(block->pending_event_device, block->pending_event);
      block->pending_event = nullptr;
      cache.stats.pending_blocks -= 1;
      make_reusable(cache, block);
    } else {
      *still_pending++ = block;
    }
  }
  cache.pending.erase(still_pending, cache.pending.end());
}

Block* take_cached(DeviceCache& cache, std::size_t size, cudaStream_t stream) {
  auto found = cache.free_by_size.find(size);
  if (found == cache.free_by_size.end()) return nullptr;
  std::vector<Block*>& blocks = found->second;
  auto take = [&](std::vector<Block*>::iterator position) {
    Block* block = *position;
    blocks.erase(position);
    cache.stats.cached_blocks -= 1;
    cache.stats.cache_hits += 1;
    return block;
  };
  // The most recently freed block of this stream: its memory is the likeliest to be in cache.
  for (auto it = blocks.end(); it != blocks.begin();) {
    --it;
    if ((*it)->stream == stream) return take(it);
  }
  for (auto it = blocks.end(); it != blocks.begin();) {
    --it;
    if (work_done(cudaStreamQuery((*it)->stream), "cudaStreamQuery(block->stream)")) {
      cache.stats.cross_stream_reuses += 1;
      return take(it);
    }
  }
  return nullptr;
}

// Gives every cached block of `device` back to CUDA. The caller holds the allocator's mutex.
void release_cache(DeviceCache& cache, int device) {
  DeviceGuard guard(device);
  for (Block* block : cache.pending) {
    ADCUDA_CHECK(cudaEventSynchronize(block->pending_event));
    release_event(block->pending_event_device, block->pending_event);
    block->pending_event = nullptr;
    cache.stats.pending_blocks -= 1;
    make_reusable(cache, block);
  }
  cache.pending.clear();
  if (cache.free_by_size.empty()) return;
  // Work queued before a block was freed may still be running on its stream.
  ADCUDA_CHECK(cudaDeviceSynchronize());
  for (auto& entry : cache.free_by_size) {
    for (Block* block : entry.second) {
      ADCUDA_CHECK(cudaFree(block->pointer));
      cache.stats.cuda_frees += 1;
      cache.stats.cached_blocks -= 1;
      add_reserved(cache.stats, -static_cast<std::int64_t>(block->size));
      delete block;
    }
  }
  cache.free_by_size.clear();
}

[[noreturn]] void throw_out_of_memory(const DeviceCache& cache, std::size_t nbytes, std::size_t size, int device) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaGetLastError();
  std::string message = "CUDA out of memory: tried to allocate " + format_bytes(nbytes) + " (" +
                        std::to_string(nbytes) + " bytes, a block of " + format_bytes(size) + ") on cuda:" +
                        std::to_string(device);
  if (known) {
    message += " (total capacity " + format_bytes(total_bytes) + ", " + format_bytes(free_bytes) + " free)";
  }
  message += "; adcuda has " + format_bytes(cache.stats.allocated_bytes) + " allocated in " +
             std::to_string(cache.stats.active_blocks) + " blocks and " + format_bytes(cache.stats.reserved_bytes) +
             " reserved, after releasing its cache and retrying. Free tensors you no longer need (and call "
             "adcuda.cuda.empty_cache()), or use a smaller batch.";
  throw OutOfMemoryError(message, nbytes);
}

#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
// On the emulator under AddressSanitizer only the bytes a block's owner requested are addressable, so
// that an overrun hidden by the size-class rounding is reported. The limit changes in stream order:
// work that the block's previous owner queued on the stream may still be running.
struct AddressableBytes {
  void* pointer;
  std::size_t requested;
  std::size_t size;
};

void CUDART_CB apply_addressable_bytes(void* argument) {
  const std::unique_ptr<AddressableBytes> bytes(static_cast<AddressableBytes*>(argument));
  ASAN_UNPOISON_MEMORY_REGION(bytes->pointer, bytes->size);
  ASAN_POISON_MEMORY_REGION(static_cast<unsigned char*>(bytes->pointer) + bytes->requested,
                            bytes->size - bytes->requested);
}

void limit_addressable_bytes(const Block& block) {
  auto* bytes = new AddressableBytes{block.pointer, block.requested, block.size};
  if (cudaLaunchHostFunc(block.stream, apply_addressable_bytes, bytes) != cudaSuccess) {
    cudaGetLastError();
    delete bytes;
  }
}
#endif

}  // namespace

std::size_t allocation_size_class(std::size_t nbytes) {
  if (nbytes <= kSmallPoolLimit) return std::max(kGranularity, round_up(nbytes, kGranularity));
  const int top_bit = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes));
  return round_up(nbytes, std::size_t(1) << (top_bit - 2));
}

Block* device_malloc(std::size_t nbytes, int device, cudaStream_t stream) {
  ensure_usable_after_fork("allocate CUDA memory");
  const std::size_t size = allocation_size_class(nbytes);
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(device);
  process_pending(cache, device);
  cache.stats.allocations += 1;
  Block* block = take_cached(cache, size, stream);
  if (block == nullptr) {
    DeviceGuard guard(device);
    void* pointer = nullptr;
    cudaError_t status = cudaMalloc(&pointer, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      cache.stats.alloc_retries += 1;
      release_cache(cache, device);
      status = cudaMalloc(&pointer, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      cache.stats.ooms += 1;
      throw_out_of_memory(cache, nbytes, size, device);
    }
    if (status != cudaSuccess) throw_cuda_error(static_cast<int>(status), "cudaMalloc(&pointer, size)", __FILE__, __LINE__);
    note_cuda_used();
    block = new Block{device, stream, size, 0, pointer, nullptr, device};
    cache.stats.cuda_mallocs += 1;
    add_reserved(cache.stats, static_cast<std::int64_t>(size));
  }
  block->stream = stream;
  block->requested = nbytes;
#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
  limit_addressable_bytes(*block);
#endif
  add_allocated(cache.stats, *block, +1);
  return block;
}

void* block_pointer(const Block* block) { return block->pointer; }
std::size_t block_size(const Block* block) { return block->size; }
cudaStream_t block_stream(const Block* block) { return block->stream; }

void device_free(Block* block, cudaStream_t last_stream, int last_stream_device) noexcept {
  if (in_bad_fork()) return;
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(block->device);
  add_allocated(cache.stats, *block, -1);
  cache.stats.frees += 1;
  if (last_stream == nullptr || last_stream == block->stream) {
    make_reusable(cache, block);
    return;
  }
  cudaEvent_t event = nullptr;
  try {
    event = acquire_event(last_stream_device);
    ADCUDA_CHECK(cudaEventRecord(event, last_stream));
  } catch (...) {
    // Without an event nothing says when the other stream is done with the block: never reuse it.
    if (event != nullptr) release_event(last_stream_device, event);
    cudaGetLastError();
    return;
  }
  block->pending_event = event;
  block->pending_event_device = last_stream_device;
  cache.pending.push_back(block);
  cache.stats.pending_blocks += 1;
}

AllocatorStats allocator_stats(int device) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  return allocator().cache(device).stats;
}

void reset_peak_allocator_stats(int device) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  AllocatorStats& stats = allocator().cache(device).stats;
  stats.peak_allocated_bytes = stats.allocated_bytes;
  stats.peak_reserved_bytes = stats.reserved_bytes;
}

void empty_cache() {
  ensure_usable_after_fork("empty the CUDA memory cache");
  std::lock_guard<std::mutex> lock(allocator().mutex);
  for (std::size_t device = 0; device < allocator().devices.size(); ++device) {
    release_cache(allocator().devices[device], static_cast<int>(device));
  }
}

void* raw_device_malloc(std::size_t nbytes, int device) {
  ensure_usable_after_fork("allocate CUDA memory");
  DeviceGuard guard(device);
  void* pointer = nullptr;
  ADCUDA_CHECK(cudaMalloc(&pointer, nbytes));
  note_cuda_used();
  return pointer;
}

void raw_device_free(void* pointer, int device) {
  DeviceGuard guard(device);
  ADCUDA_CHECK(cudaFree(pointer));
}

}  // namespace adcuda
