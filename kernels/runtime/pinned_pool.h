// The pinned (page-locked) host memory pool. cudaHostAlloc is slow (it maps the pages for the GPU), so
// blocks are kept and reused, in the device allocator's size classes. Every host<->device copy goes
// through pinned memory: only from it can a copy run asynchronously.
//
// A block handed out may be used by copies still queued on streams; pinned_record_use notes each one
// (an event), and a freed block returns to the pool only once they have all completed, so a copy never
// reads memory that was meanwhile handed to someone else. Thread-safe; never touches Python.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace adcuda {

struct PinnedBlock;

// At least `nbytes` (> 0) of pinned memory. Releases the pool's cache and retries once if
// cudaHostAlloc fails; then throws OutOfMemoryError.
PinnedBlock* pinned_malloc(std::size_t nbytes);
void* pinned_pointer(const PinnedBlock* block);
std::size_t pinned_size(const PinnedBlock* block);
// A copy reading or writing `block` was queued on `stream` (of `device`).
void pinned_record_use(PinnedBlock* block, cudaStream_t stream, int device);
// Give the block back; it is reused once every recorded copy has completed. Never throws.
void pinned_free(PinnedBlock* block) noexcept;
// The pool's block that contains `pointer`, or nullptr if the pool did not hand it out.
PinnedBlock* pinned_block_containing(const void* pointer);

struct PinnedStats {
  std::int64_t allocated_bytes = 0;   // in blocks handed out
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;    // obtained from cudaHostAlloc and not yet freed
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t active_blocks = 0;
  std::int64_t cached_blocks = 0;
  std::int64_t pending_blocks = 0;    // freed, waiting for queued copies
  std::int64_t allocations = 0;
  std::int64_t cache_hits = 0;
  std::int64_t host_allocs = 0;       // cudaHostAlloc calls
  std::int64_t host_frees = 0;
  std::int64_t recorded_uses = 0;     // copies noted with pinned_record_use
};

PinnedStats pinned_stats();
void reset_peak_pinned_stats();
// Frees every cached block (waiting for the copies pending on freed blocks first).
void pinned_empty_cache();

}  // namespace adcuda
