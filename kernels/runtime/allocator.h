// The caching device allocator (PyTorch's design). cudaMalloc and cudaFree are slow and synchronise the
// device, so memory is taken from CUDA in segments and handed out as blocks carved from them:
//  - requests are rounded up to 512 bytes; those of at most 1 MiB come from the small pool (2 MiB
//    segments), larger ones from the large pool (20 MiB segments for requests under 10 MiB, else a
//    segment of the request rounded up to 2 MiB);
//  - the best-fitting free block (the smallest that is large enough) is taken and split: the remainder
//    stays free in the cache (small pool: when at least 512 bytes are left; large pool: more than
//    1 MiB); a freed block merges with its free neighbours, so memory freed by tensors of varying
//    shapes becomes one block again instead of fragments;
//  - blocks belong to the stream they were allocated for, and are reused first by the same stream
//    (its later work runs after its earlier work on the block: no synchronisation needed); another
//    stream may take a free block only while the owning stream has no queued work (cudaStreamQuery);
//    only free blocks of the same stream merge;
//  - a block used on other streams too (Storage: the last stream, external users such as DLPack
//    consumers) waits, after its free, for an event recorded on each of them before it is reused
//    (PyTorch's record_stream);
//  - when cudaMalloc fails, the segments with no block in use are given back to CUDA and the call is
//    retried once; after that OutOfMemoryError says what was asked for, allocated and reserved;
//  - private pools (CUDA graphs, graph.h): while a stream captures, its allocations come from segments of
//    the capture's pool, and its blocks go back to that pool only, so no allocation outside the pool
//    gets memory a graph's replays write to. A pool lives while a capture or a graph uses it; then its
//    segments return to the ordinary cache. During a capture nothing here queries or synchronises a
//    capturing stream or event (illegal then): pending events are processed, and frees needing events
//    recorded, after the last capture ends.
// Thread-safe: one mutex, never held across a synchronisation (releasing memory waits for the streams
// that used it with the mutex released); nothing here touches Python.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/device_array.h"

namespace adcuda {

struct Block;

// A block of at least `nbytes` (> 0) on `device`, for use on `stream`.
Block* device_malloc(std::size_t nbytes, int device, cudaStream_t stream);
void* block_pointer(const Block* block);
std::size_t block_size(const Block* block);
cudaStream_t block_stream(const Block* block);
// Return `block` to the cache. `uses` are the streams whose queued work may still use it (the block's
// own stream needs no entry; nullptr streams are ignored): it is reused only after each of them has
// finished that work. Never throws; in a bad fork the block is forgotten.
void device_free(Block* block, const StreamUse* uses, std::size_t count) noexcept;

// A statistic as PyTorch's allocator keeps it: its current value, its peak since the last reset, and
// the totals added and removed since the start.
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;
};

enum Pool { kAllPools = 0, kSmallPool = 1, kLargePool = 2, kPoolKinds = 3 };

struct AllocatorStats {
  Stat allocated_bytes[kPoolKinds];       // in blocks handed out (rounded sizes)
  Stat requested_bytes[kPoolKinds];       // what callers asked for
  Stat reserved_bytes[kPoolKinds];        // in segments from cudaMalloc
  Stat active[kPoolKinds];                // blocks handed out or waiting for other streams after their free
  Stat active_bytes[kPoolKinds];
  Stat inactive_split[kPoolKinds];        // free blocks of a segment that also holds a block in use
  Stat inactive_split_bytes[kPoolKinds];  //   (their memory cannot be given back to CUDA)
  Stat segment[kPoolKinds];               // segments from cudaMalloc
  Stat allocation[kPoolKinds];            // requests served
  std::int64_t num_alloc_retries = 0;     // cudaMalloc failed, free segments were released, and it was retried
  std::int64_t num_ooms = 0;              // out of memory even after the retry
  std::int64_t num_device_alloc = 0;      // cudaMalloc calls
  std::int64_t num_device_free = 0;       // cudaFree calls
  std::int64_t cache_hits = 0;            // requests served from cached blocks (no cudaMalloc)
  std::int64_t cross_stream_reuses = 0;   // cache hits taken from another (idle) stream
  std::int64_t pending_blocks = 0;        // freed blocks waiting for another stream's work
  std::int64_t cached_blocks = 0;         // free blocks (whole or split)
};

AllocatorStats allocator_stats(int device);
// Peaks start again from the current values.
void reset_peak_allocator_stats(int device);
// Give every segment with no block in use back to CUDA, on every device, after the work that may still
// use its blocks is done (freed blocks waiting for other streams are waited for). Blocks in use, the
// free blocks sharing a segment with them, and the segments of private pools a graph still uses stay.
void empty_cache();
// The bytes of the block a request for `nbytes` gets (512-byte multiples).
std::size_t device_block_size(std::size_t nbytes);
// Size classes of the pinned host pool (pinned_pool.cu): multiples of 512 B up to 1 MiB, above that four
// classes per power of two (at most 25% rounding), so that freed host blocks are reused whole.
std::size_t allocation_size_class(std::size_t nbytes);

// Allocations on `stream` come from private pool `pool` (created on first use) until
// end_allocate_to_pool; the capture counts as a user of the pool meanwhile.
void begin_allocate_to_pool(int device, std::uint64_t pool, cudaStream_t stream);
void end_allocate_to_pool(int device, std::uint64_t pool, cudaStream_t stream) noexcept;
// A graph keeps its pool alive: retain when its capture succeeded, release when it is reset.
void retain_private_pool(int device, std::uint64_t pool);
void release_private_pool(int device, std::uint64_t pool) noexcept;
// Bytes of the segments private pool `pool` holds (0 once it returned them to the cache).
std::size_t private_pool_reserved_bytes(int device, std::uint64_t pool);

// cudaMalloc/cudaFree without the cache (for benchmarks and tests).
void* raw_device_malloc(std::size_t nbytes, int device);
void raw_device_free(void* pointer, int device);

}  // namespace adcuda
