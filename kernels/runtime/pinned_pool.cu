#include "runtime/pinned_pool.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace adcuda {

struct PinnedBlock {
  void* pointer;
  std::size_t size;
  std::size_t requested;
  std::vector<std::pair<int, cudaEvent_t>> uses;  // (device, event) of copies that may still run
};

namespace {

struct PinnedPool {
  std::mutex mutex;
  std::map<std::uintptr_t, PinnedBlock*> by_address;  // every block obtained from CUDA
  std::unordered_map<std::size_t, std::vector<PinnedBlock*>> free_by_size;
  std::vector<PinnedBlock*> pending;
  PinnedStats stats;
};

// Leaked on purpose: NumPy arrays over pinned memory may be freed after static destructors ran.
PinnedPool& pool() {
  static PinnedPool* instance = new PinnedPool();
  return *instance;
}

bool event_done(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  throw_cuda_error(static_cast<int>(status), "cudaEventQuery(event)", __FILE__, __LINE__);
}

// Drops the uses that have completed; true when none is left.
bool forget_completed_uses(PinnedBlock* block) {
  auto& uses = block->uses;
  auto kept = std::remove_if(uses.begin(), uses.end(), [](const std::pair<int, cudaEvent_t>& use) {
    if (!event_done(use.second)) return false;
    release_event(use.first, use.second);
    return true;
  });
  uses.erase(kept, uses.end());
  return uses.empty();
}

void make_reusable(PinnedPool& p, PinnedBlock* block) {
  p.free_by_size[block->size].push_back(block);
  p.stats.cached_blocks += 1;
}

void process_pending(PinnedPool& p) {
  auto still_pending = p.pending.begin();
  for (PinnedBlock* block : p.pending) {
    if (forget_completed_uses(block)) {
      p.stats.pending_blocks -= 1;
      make_reusable(p, block);
    } else {
      *still_pending++ = block;
    }
  }
  p.pending.erase(still_pending, p.pending.end());
}

void release_cache(PinnedPool& p) {
  for (PinnedBlock* block : p.pending) {
    for (const auto& use : block->uses) {
      ADCUDA_CHECK(cudaEventSynchronize(use.second));
      release_event(use.first, use.second);
    }
    block->uses.clear();
    p.stats.pending_blocks -= 1;
    make_reusable(p, block);
  }
  p.pending.clear();
  for (auto& entry : p.free_by_size) {
    for (PinnedBlock* block : entry.second) {
      ADCUDA_CHECK(cudaFreeHost(block->pointer));
      p.by_address.erase(reinterpret_cast<std::uintptr_t>(block->pointer));
      p.stats.reserved_bytes -= static_cast<std::int64_t>(block->size);
      p.stats.cached_blocks -= 1;
      p.stats.host_frees += 1;
      delete block;
    }
  }
  p.free_by_size.clear();
}

}  // namespace

PinnedBlock* pinned_malloc(std::size_t nbytes) {
  ensure_usable_after_fork("allocate pinned host memory");
  const std::size_t size = allocation_size_class(nbytes);
  PinnedPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  process_pending(p);
  p.stats.allocations += 1;
  PinnedBlock* block = nullptr;
  auto found = p.free_by_size.find(size);
  if (found != p.free_by_size.end() && !found->second.empty()) {
    block = found->second.back();
    found->second.pop_back();
    p.stats.cached_blocks -= 1;
    p.stats.cache_hits += 1;
  } else {
    void* pointer = nullptr;
    // Portable: pinned for every device's context, not only the current one.
    cudaError_t status = cudaHostAlloc(&pointer, size, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cache(p);
      status = cudaHostAlloc(&pointer, size, cudaHostAllocPortable);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemoryError("out of pinned host memory: tried to allocate " + format_bytes(nbytes) + " (" +
                                 std::to_string(nbytes) + " bytes); the pinned pool holds " +
                                 format_bytes(p.stats.allocated_bytes) + " in use and " +
                                 format_bytes(p.stats.reserved_bytes) + " reserved after releasing its cache",
                             nbytes);
    }
    if (status != cudaSuccess) {
      throw_cuda_error(static_cast<int>(status), "cudaHostAlloc(&pointer, size, cudaHostAllocPortable)", __FILE__,
                       __LINE__);
    }
    note_cuda_used();
    block = new PinnedBlock{pointer, size, 0, {}};
    p.by_address.emplace(reinterpret_cast<std::uintptr_t>(pointer), block);
    p.stats.host_allocs += 1;
    p.stats.reserved_bytes += static_cast<std::int64_t>(size);
    p.stats.peak_reserved_bytes = std::max(p.stats.peak_reserved_bytes, p.stats.reserved_bytes);
  }
  block->requested = nbytes;
  p.stats.allocated_bytes += static_cast<std::int64_t>(size);
  p.stats.peak_allocated_bytes = std::max(p.stats.peak_allocated_bytes, p.stats.allocated_bytes);
  p.stats.active_blocks += 1;
  return block;
}

void* pinned_pointer(const PinnedBlock* block) { return block->pointer; }
std::size_t pinned_size(const PinnedBlock* block) { return block->size; }

void pinned_record_use(PinnedBlock* block, cudaStream_t stream, int device) {
  PinnedPool& p = pool();
  cudaEvent_t event = acquire_event(device);
  try {
    ADCUDA_CHECK(cudaEventRecord(event, stream));
  } catch (...) {
    release_event(device, event);
    throw;
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  // A block reused for many copies (a persistent pinned buffer) keeps only the uses still running.
  forget_completed_uses(block);
  block->uses.emplace_back(device, event);
  p.stats.recorded_uses += 1;
}

void pinned_free(PinnedBlock* block) noexcept {
  if (in_bad_fork()) return;
  PinnedPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.stats.allocated_bytes -= static_cast<std::int64_t>(block->size);
  p.stats.active_blocks -= 1;
  bool idle = false;
  try {
    idle = forget_completed_uses(block);
  } catch (...) {
    // The events cannot be read (a broken context): the copies may still run, so never reuse it.
    cudaGetLastError();
    return;
  }
  if (idle) {
    make_reusable(p, block);
  } else {
    p.pending.push_back(block);
    p.stats.pending_blocks += 1;
  }
}

PinnedBlock* pinned_block_containing(const void* pointer) {
  PinnedPool& p = pool();
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto after = p.by_address.upper_bound(address);
  if (after == p.by_address.begin()) return nullptr;
  PinnedBlock* block = std::prev(after)->second;
  return address < std::prev(after)->first + block->size ? block : nullptr;
}

PinnedStats pinned_stats() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  return pool().stats;
}

void reset_peak_pinned_stats() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  PinnedStats& stats = pool().stats;
  stats.peak_allocated_bytes = stats.allocated_bytes;
  stats.peak_reserved_bytes = stats.reserved_bytes;
}

void pinned_empty_cache() {
  ensure_usable_after_fork("empty the pinned memory cache");
  std::lock_guard<std::mutex> lock(pool().mutex);
  release_cache(pool());
}

}  // namespace adcuda
