// The caching device allocator. cudaMalloc and cudaFree are slow and synchronise the device, so freed
// blocks are kept and handed out again:
//  - sizes are rounded to a size class: multiples of 512 B up to 1 MiB (the small pool), above that
//    four classes per power of two (the large pool, at most 25% rounding);
//  - a free block is listed under the stream it was allocated for, and is reused first for the same
//    stream and class: the stream's later work runs after the earlier work on the block, so no
//    synchronisation is needed;
//  - another stream may take it only when cudaStreamQuery says the block's stream has finished all
//    its queued work;
//  - a block whose last use was on another stream than its own (the Storage records that stream) is
//    held back until an event recorded on that stream completes (PyTorch's record_stream idea);
//  - when cudaMalloc fails, every cached block is released and the call retried once; after that
//    OutOfMemoryError says what was asked for and what is allocated and reserved.
// Thread-safe; every call takes one mutex, and none of them touches Python.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace adcuda {

struct Block;

// A block of at least `nbytes` (> 0) on `device`, for use on `stream`.
Block* device_malloc(std::size_t nbytes, int device, cudaStream_t stream);
void* block_pointer(const Block* block);
std::size_t block_size(const Block* block);
cudaStream_t block_stream(const Block* block);
// Return `block` to the cache. `last_stream` (nullptr: the block's own stream), a stream of
// `last_stream_device`, is the stream whose queued work used it last. Never throws; in a bad fork the
// block is forgotten.
void device_free(Block* block, cudaStream_t last_stream, int last_stream_device) noexcept;

struct AllocatorStats {
  std::int64_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t requested_bytes = 0;       // what callers asked for
  std::int64_t reserved_bytes = 0;        // obtained from cudaMalloc and not yet freed
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t small_pool_allocated_bytes = 0;
  std::int64_t small_pool_reserved_bytes = 0;
  std::int64_t large_pool_allocated_bytes = 0;
  std::int64_t large_pool_reserved_bytes = 0;
  std::int64_t active_blocks = 0;         // handed out
  std::int64_t cached_blocks = 0;         // free, ready for reuse
  std::int64_t pending_blocks = 0;        // free, waiting for another stream's work
  std::int64_t allocations = 0;
  std::int64_t frees = 0;
  std::int64_t cache_hits = 0;
  std::int64_t cross_stream_reuses = 0;   // cache hits taken from another (idle) stream
  std::int64_t cuda_mallocs = 0;
  std::int64_t cuda_frees = 0;
  std::int64_t alloc_retries = 0;         // cudaMalloc failed, the cache was released, and it was retried
  std::int64_t ooms = 0;                  // out of memory even after the retry
};

AllocatorStats allocator_stats(int device);
// Peaks start again from the current values.
void reset_peak_allocator_stats(int device);
// Give every cached block on every device back to CUDA, after the work that may still use them is done.
// Blocks in use are not touched.
void empty_cache();
// The size class a request for `nbytes` gets.
std::size_t allocation_size_class(std::size_t nbytes);

// cudaMalloc/cudaFree without the cache (for benchmarks and tests).
void* raw_device_malloc(std::size_t nbytes, int device);
void raw_device_free(void* pointer, int device);

}  // namespace adcuda
