#include "runtime/allocator.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/process.h"
#include "runtime/stream.h"

#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

#include <memory>
#endif

namespace adcuda {

struct Block {
  int device;
  Pool pool;                // kSmallPool or kLargePool
  cudaStream_t stream;      // the stream it belongs to (free lists are per stream)
  std::size_t size;
  std::size_t requested;    // what the current owner asked for (0 while free)
  void* pointer;
  bool in_use;              // handed out, or freed but waiting for other streams' work
  bool abandoned;           // no event could say when another stream is done with it: never reused
  int pending_events;       // events (recorded on other streams at its free) still to complete
  Block* prev;              // neighbours in the segment, by address (nullptr at its ends)
  Block* next;
  std::uint64_t private_pool = 0;  // the CUDA graph pool its segment belongs to (0: the ordinary cache)
};

namespace {

constexpr std::size_t kMinBlockSize = 512;              // every block is a multiple of this
constexpr std::size_t kSmallSize = std::size_t(1) << 20;  // requests up to this come from the small pool
constexpr std::size_t kSmallSegment = std::size_t(2) << 20;
constexpr std::size_t kMinLargeAlloc = std::size_t(10) << 20;  // requests under this share 20 MiB segments
constexpr std::size_t kLargeSegment = std::size_t(20) << 20;
constexpr std::size_t kRoundLarge = std::size_t(2) << 20;

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

std::uintptr_t address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

// Free blocks ordered by private pool, stream, size, then address: the best fit for a stream is the
// first block at or after {pool, stream, size}.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->private_pool != b->private_pool) return a->private_pool < b->private_pool;
    if (a->stream != b->stream) return address(a->stream) < address(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return address(a->pointer) < address(b->pointer);
  }
};
using FreeBlocks = std::set<Block*, BlockOrder>;

struct PendingEvent {
  Block* block;
  cudaEvent_t event;
  int event_device;
};

// A free made during a capture that needs events recorded on other streams: done after the capture.
struct DeferredFree {
  Block* block;
  std::vector<StreamUse> uses;
};

struct DeviceCache {
  FreeBlocks free_blocks[kPoolKinds];  // indexed by kSmallPool and kLargePool
  std::vector<Block*> segments;        // the first block of each segment (it never merges away)
  std::vector<PendingEvent> pending;
  std::vector<DeferredFree> deferred;
  std::vector<std::pair<cudaStream_t, std::uint64_t>> routed;  // capturing stream -> its private pool
  std::vector<std::pair<std::uint64_t, int>> pool_users;       // live private pools: captures + graphs
  AllocatorStats stats;
};

struct Allocator {
  std::mutex mutex;
  std::vector<DeviceCache> devices;
  int captures_underway = 0;  // on any device: events must be neither queried nor recorded meanwhile

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

void increase(Stat (&stat)[kPoolKinds], Pool pool, std::int64_t amount) {
  for (Stat* s : {&stat[kAllPools], &stat[pool]}) {
    s->current += amount;
    s->allocated += amount;
    s->peak = std::max(s->peak, s->current);
  }
}

void decrease(Stat (&stat)[kPoolKinds], Pool pool, std::int64_t amount) {
  for (Stat* s : {&stat[kAllPools], &stat[pool]}) {
    s->current -= amount;
    s->freed += amount;
  }
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

void insert_free(DeviceCache& cache, Block* block) {
  cache.free_blocks[block->pool].insert(block);
  cache.stats.cached_blocks += 1;
}

void erase_free(DeviceCache& cache, Block* block) {
  cache.free_blocks[block->pool].erase(block);
  cache.stats.cached_blocks -= 1;
}

// `neighbour` (free, of the same stream) is absorbed into the block before it in memory.
void absorb_next(Block* block) {
  Block* next = block->next;
  block->size += next->size;
  block->next = next->next;
  if (block->next != nullptr) block->next->prev = block;
  delete next;
}

bool mergeable(const Block* neighbour, const Block* block) {
  return neighbour != nullptr && !neighbour->in_use && neighbour->stream == block->stream &&
         neighbour->private_pool == block->private_pool;
}

// `block` is free for reuse: merged with its free neighbours of the same stream and put in the cache.
void make_free(DeviceCache& cache, Block* block) {
  block->in_use = false;
  block->requested = 0;
  decrease(cache.stats.active, block->pool, 1);
  decrease(cache.stats.active_bytes, block->pool, static_cast<std::int64_t>(block->size));
  if (mergeable(block->next, block)) {
    erase_free(cache, block->next);
    absorb_next(block);
  }
  if (mergeable(block->prev, block)) {
    Block* prev = block->prev;
    erase_free(cache, prev);
    absorb_next(prev);
    block = prev;
  }
  insert_free(cache, block);
}

// Blocks whose last pending event has completed become free. Not during a capture: querying an event
// then is an unsafe call that would invalidate it.
void process_pending(DeviceCache& cache) {
  if (allocator().captures_underway > 0) return;
  auto still_pending = cache.pending.begin();
  for (PendingEvent& entry : cache.pending) {
    if (work_done(cudaEventQuery(entry.event), "cudaEventQuery(pending.event)")) {
      release_event(entry.event_device, entry.event);
      Block* block = entry.block;
      if (--block->pending_events == 0 && !block->abandoned) {
        cache.stats.pending_blocks -= 1;
        make_free(cache, block);
      }
    } else {
      *still_pending++ = entry;
    }
  }
  cache.pending.erase(still_pending, cache.pending.end());
}

bool should_split(const Block* block, std::size_t size) {
  const std::size_t remaining = block->size - size;
  return block->pool == kSmallPool ? remaining >= kMinBlockSize : remaining > kSmallSize;
}

// Cuts `block` down to `size`; the rest stays free in the cache.
void split(DeviceCache& cache, Block* block, std::size_t size) {
  if (!should_split(block, size)) return;
  auto* rest = new Block{block->device, block->pool, block->stream, block->size - size, 0,
                         static_cast<char*>(block->pointer) + size, false, false, 0, block, block->next,
                         block->private_pool};
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  insert_free(cache, rest);
}

// Whether another thread's capture runs on `stream` (which must then not be queried).
bool capturing(cudaStream_t stream) {
  if (allocator().captures_underway == 0) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

// The best-fitting free block of `pool` for `stream` in `private_pool`: one of its own, else (in the
// ordinary cache only) one of a stream with no queued work (which it then belongs to). Taken out of the
// free list.
Block* take_free(DeviceCache& cache, Pool pool, std::size_t size, cudaStream_t stream, std::uint64_t private_pool) {
  FreeBlocks& blocks = cache.free_blocks[pool];
  Block key{};
  key.stream = stream;
  key.size = size;
  key.pointer = nullptr;
  key.private_pool = private_pool;
  auto found = blocks.lower_bound(&key);
  if (found != blocks.end() && (*found)->stream == stream && (*found)->private_pool == private_pool) {
    Block* block = *found;
    erase_free(cache, block);
    cache.stats.cache_hits += 1;
    return block;
  }
  if (private_pool != 0) return nullptr;
  Block* best = nullptr;
  std::vector<cudaStream_t> busy;
  for (Block* block : blocks) {
    if (block->private_pool != 0) break;  // ordered first by pool: the ordinary cache's blocks are done
    if (block->stream == stream || block->size < size || (best != nullptr && block->size >= best->size)) continue;
    if (std::find(busy.begin(), busy.end(), block->stream) != busy.end()) continue;
    if (capturing(block->stream)) {
      busy.push_back(block->stream);
      continue;
    }
    if (work_done(cudaStreamQuery(block->stream), "cudaStreamQuery(block->stream)")) {
      best = block;
    } else {
      busy.push_back(block->stream);
    }
  }
  if (best == nullptr) return nullptr;
  erase_free(cache, best);
  best->stream = stream;
  cache.stats.cache_hits += 1;
  cache.stats.cross_stream_reuses += 1;
  return best;
}

std::size_t segment_size(std::size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc) return kLargeSegment;
  return round_up(size, kRoundLarge);
}

// Waits, with the mutex released, for the events of every pending block of `device`, then frees them.
void wait_for_pending(int device) {
  std::vector<PendingEvent> waiting;
  {
    std::lock_guard<std::mutex> lock(allocator().mutex);
    waiting.swap(allocator().cache(device).pending);
  }
  cudaError_t failure = cudaSuccess;
  for (const PendingEvent& entry : waiting) {
    const cudaError_t status = cudaEventSynchronize(entry.event);
    if (status != cudaSuccess && failure == cudaSuccess) failure = status;
  }
  {
    std::lock_guard<std::mutex> lock(allocator().mutex);
    DeviceCache& cache = allocator().cache(device);
    for (const PendingEvent& entry : waiting) {
      release_event(entry.event_device, entry.event);
      Block* block = entry.block;
      if (--block->pending_events == 0 && !block->abandoned) {
        cache.stats.pending_blocks -= 1;
        make_free(cache, block);
      }
    }
  }
  if (failure != cudaSuccess) throw_cuda_error(static_cast<int>(failure), "cudaEventSynchronize(pending.event)",
                                               __FILE__, __LINE__);
}

// Gives every segment of `device` with no block in use back to CUDA. The segments leave the cache under
// the mutex (nobody can take their blocks any more); the wait for the streams that used them and the
// cudaFree calls happen with it released, so other threads allocate and free meanwhile.
void release_free_segments(int device) {
  struct Released {
    void* pointer;
    std::size_t size;
    Pool pool;
  };
  std::vector<Released> released;
  std::vector<cudaStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(allocator().mutex);
    DeviceCache& cache = allocator().cache(device);
    process_pending(cache);
    auto kept = cache.segments.begin();
    for (Block* head : cache.segments) {
      // A live private pool's free blocks are still a graph's memory: its replays write there.
      bool free = head->private_pool == 0;
      for (Block* b = head; b != nullptr && free; b = b->next) free = !b->in_use;
      if (!free) {
        *kept++ = head;
        continue;
      }
      std::size_t size = 0;
      for (Block* b = head; b != nullptr;) {
        Block* next = b->next;
        size += b->size;
        if (std::find(streams.begin(), streams.end(), b->stream) == streams.end()) streams.push_back(b->stream);
        erase_free(cache, b);
        if (b != head) delete b;
        b = next;
      }
      released.push_back({head->pointer, size, head->pool});
      delete head;
    }
    cache.segments.erase(kept, cache.segments.end());
  }
  if (released.empty()) return;
  DeviceGuard guard(device);
  // Work queued on a block before its free may still run on its stream.
  for (cudaStream_t stream : streams) ADCUDA_CHECK(cudaStreamSynchronize(stream));
  for (const Released& segment : released) ADCUDA_CHECK(cudaFree(segment.pointer));
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(device);
  for (const Released& segment : released) {
    decrease(cache.stats.segment, segment.pool, 1);
    decrease(cache.stats.reserved_bytes, segment.pool, static_cast<std::int64_t>(segment.size));
    cache.stats.num_device_free += 1;
  }
}

[[noreturn]] void throw_out_of_memory(const DeviceCache& cache, std::size_t nbytes, std::size_t size, int device) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaGetLastError();
  std::string message = "CUDA out of memory: tried to allocate " + format_bytes(nbytes) + " (" +
                        std::to_string(nbytes) + " bytes, a segment of " + format_bytes(size) + ") on cuda:" +
                        std::to_string(device);
  if (known) {
    message += " (total capacity " + format_bytes(total_bytes) + ", " + format_bytes(free_bytes) + " free)";
  }
  message += "; adcuda has " + format_bytes(cache.stats.allocated_bytes[kAllPools].current) + " allocated in " +
             std::to_string(cache.stats.active[kAllPools].current) + " blocks and " +
             format_bytes(cache.stats.reserved_bytes[kAllPools].current) +
             " reserved, after releasing its cache and retrying. Free tensors you no longer need (and call "
             "adcuda.cuda.empty_cache()), or use a smaller batch.";
  throw OutOfMemoryError(message, nbytes);
}

#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
// On the emulator under AddressSanitizer only the bytes a block's owner requested are addressable, so
// that an overrun hidden by the rounding is reported. The limit changes in stream order: work that the
// block's previous owner queued on the stream may still be running.
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

// Defined with the private pools below.
void free_block(DeviceCache& cache, Block* block, const StreamUse* uses, std::size_t count) noexcept;
std::uint64_t routed_pool(const DeviceCache& cache, cudaStream_t stream);

}  // namespace

std::size_t device_block_size(std::size_t nbytes) { return std::max(kMinBlockSize, round_up(nbytes, kMinBlockSize)); }

std::size_t allocation_size_class(std::size_t nbytes) {
  if (nbytes <= kSmallSize) return device_block_size(nbytes);
  const int top_bit = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes));
  return round_up(nbytes, std::size_t(1) << (top_bit - 2));
}

Block* device_malloc(std::size_t nbytes, int device, cudaStream_t stream) {
  ensure_usable_after_fork("allocate CUDA memory");
  const std::size_t size = device_block_size(nbytes);
  const Pool pool = size <= kSmallSize ? kSmallPool : kLargePool;
  std::unique_lock<std::mutex> lock(allocator().mutex);
  DeviceCache* cache = &allocator().cache(device);
  process_pending(*cache);
  const std::uint64_t private_pool = routed_pool(*cache, stream);
  Block* block = take_free(*cache, pool, size, stream, private_pool);
  if (block == nullptr) {
    const std::size_t segment = segment_size(size);
    DeviceGuard guard(device);
    void* pointer = nullptr;
    cudaError_t status = cudaMalloc(&pointer, segment);
    // Releasing the cache synchronises streams and calls cudaFree: not while a graph is being captured.
    if (status == cudaErrorMemoryAllocation && allocator().captures_underway == 0) {
      cudaGetLastError();
      cache->stats.num_alloc_retries += 1;
      lock.unlock();
      wait_for_pending(device);
      release_free_segments(device);
      lock.lock();
      cache = &allocator().cache(device);
      process_pending(*cache);
      block = take_free(*cache, pool, size, stream, private_pool);  // another thread may have freed one meanwhile
      if (block == nullptr) status = cudaMalloc(&pointer, segment);
    }
    if (block == nullptr) {
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        cache->stats.num_ooms += 1;
        throw_out_of_memory(*cache, nbytes, segment, device);
      }
      if (status != cudaSuccess) {
        throw_cuda_error(static_cast<int>(status), "cudaMalloc(&pointer, segment)", __FILE__, __LINE__);
      }
      note_cuda_used();
      block = new Block{device, pool, stream, segment, 0, pointer, false, false, 0, nullptr, nullptr, private_pool};
      cache->segments.push_back(block);
      cache->stats.num_device_alloc += 1;
      increase(cache->stats.segment, pool, 1);
      increase(cache->stats.reserved_bytes, pool, static_cast<std::int64_t>(segment));
    }
  }
  split(*cache, block, size);
  block->in_use = true;
  block->requested = nbytes;
#if defined(ADCUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
  limit_addressable_bytes(*block);
#endif
  AllocatorStats& stats = cache->stats;
  increase(stats.allocated_bytes, pool, static_cast<std::int64_t>(block->size));
  increase(stats.requested_bytes, pool, static_cast<std::int64_t>(nbytes));
  increase(stats.active, pool, 1);
  increase(stats.active_bytes, pool, static_cast<std::int64_t>(block->size));
  increase(stats.allocation, pool, 1);
  return block;
}

void* block_pointer(const Block* block) { return block->pointer; }
std::size_t block_size(const Block* block) { return block->size; }
cudaStream_t block_stream(const Block* block) { return block->stream; }

void device_free(Block* block, const StreamUse* uses, std::size_t count) noexcept {
  if (in_bad_fork()) return;
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(block->device);
  decrease(cache.stats.allocated_bytes, block->pool, static_cast<std::int64_t>(block->size));
  decrease(cache.stats.requested_bytes, block->pool, static_cast<std::int64_t>(block->requested));
  if (allocator().captures_underway > 0) {
    // An event recorded on a capturing stream would become part of its graph: wait for the capture.
    for (std::size_t i = 0; i < count; ++i) {
      if (uses[i].stream != nullptr && uses[i].stream != block->stream) {
        cache.deferred.push_back({block, std::vector<StreamUse>(uses, uses + count)});
        return;
      }
    }
  }
  free_block(cache, block, uses, count);
}

namespace {

void free_block(DeviceCache& cache, Block* block, const StreamUse* uses, std::size_t count) noexcept {
  std::vector<cudaStream_t> recorded;
  for (std::size_t i = 0; i < count; ++i) {
    const StreamUse& use = uses[i];
    if (use.stream == nullptr || use.stream == block->stream) continue;
    if (std::find(recorded.begin(), recorded.end(), use.stream) != recorded.end()) continue;
    cudaEvent_t event = nullptr;
    try {
      event = acquire_event(use.device);
      ADCUDA_CHECK(cudaEventRecord(event, use.stream));
    } catch (...) {
      // Without an event nothing says when that stream is done with the block: never reuse it.
      if (event != nullptr) release_event(use.device, event);
      cudaGetLastError();
      block->abandoned = true;
      continue;
    }
    recorded.push_back(use.stream);
    cache.pending.push_back({block, event, use.device});
    block->pending_events += 1;
  }
  if (block->abandoned) return;
  if (block->pending_events > 0) {
    cache.stats.pending_blocks += 1;
    return;
  }
  make_free(cache, block);
}

std::uint64_t routed_pool(const DeviceCache& cache, cudaStream_t stream) {
  for (const auto& route : cache.routed) {
    if (route.first == stream) return route.second;
  }
  return 0;
}

int& pool_user_count(DeviceCache& cache, std::uint64_t pool) {
  for (auto& entry : cache.pool_users) {
    if (entry.first == pool) return entry.second;
  }
  cache.pool_users.push_back({pool, 0});
  return cache.pool_users.back().second;
}

// Nothing uses the pool any more: its segments join the ordinary cache (blocks still held, such as a
// graph's outputs the caller kept, return there when freed).
void dissolve_pool(DeviceCache& cache, std::uint64_t pool) {
  cache.pool_users.erase(std::remove_if(cache.pool_users.begin(), cache.pool_users.end(),
                                        [pool](const auto& entry) { return entry.first == pool; }),
                         cache.pool_users.end());
  for (Block* head : cache.segments) {
    if (head->private_pool != pool) continue;
    for (Block* b = head; b != nullptr; b = b->next) {
      if (b->in_use) {
        b->private_pool = 0;
        continue;
      }
      erase_free(cache, b);  // its place in the free list depends on the pool
      b->private_pool = 0;
      insert_free(cache, b);
    }
  }
}

void release_pool_user(DeviceCache& cache, std::uint64_t pool) {
  int& users = pool_user_count(cache, pool);
  if (--users <= 0) dissolve_pool(cache, pool);
}

}  // namespace

void begin_allocate_to_pool(int device, std::uint64_t pool, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(device);
  if (routed_pool(cache, stream) != 0) {
    throw std::logic_error("begin_allocate_to_pool: the stream already allocates into a private pool");
  }
  cache.routed.push_back({stream, pool});
  pool_user_count(cache, pool) += 1;
  allocator().captures_underway += 1;
}

void end_allocate_to_pool(int device, std::uint64_t pool, cudaStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(device);
  cache.routed.erase(std::remove_if(cache.routed.begin(), cache.routed.end(),
                                    [stream](const auto& route) { return route.first == stream; }),
                     cache.routed.end());
  release_pool_user(cache, pool);
  if (--allocator().captures_underway > 0) return;
  for (DeviceCache& each : allocator().devices) {
    std::vector<DeferredFree> deferred;
    deferred.swap(each.deferred);
    for (DeferredFree& entry : deferred) free_block(each, entry.block, entry.uses.data(), entry.uses.size());
  }
}

void retain_private_pool(int device, std::uint64_t pool) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  pool_user_count(allocator().cache(device), pool) += 1;
}

void release_private_pool(int device, std::uint64_t pool) noexcept {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  release_pool_user(allocator().cache(device), pool);
}

std::size_t private_pool_reserved_bytes(int device, std::uint64_t pool) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  std::size_t bytes = 0;
  for (Block* head : allocator().cache(device).segments) {
    if (head->private_pool != pool) continue;
    for (Block* b = head; b != nullptr; b = b->next) bytes += b->size;
  }
  return bytes;
}

AllocatorStats allocator_stats(int device) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  DeviceCache& cache = allocator().cache(device);
  AllocatorStats stats = cache.stats;
  // Free blocks that share a segment with a block in use: cached, but not releasable.
  for (Block* head : cache.segments) {
    bool used = false;
    for (Block* b = head; b != nullptr && !used; b = b->next) used = b->in_use;
    if (!used) continue;
    for (Block* b = head; b != nullptr; b = b->next) {
      if (b->in_use) continue;
      for (Stat* s : {&stats.inactive_split[kAllPools], &stats.inactive_split[b->pool]}) s->current += 1;
      for (Stat* s : {&stats.inactive_split_bytes[kAllPools], &stats.inactive_split_bytes[b->pool]}) {
        s->current += static_cast<std::int64_t>(b->size);
      }
    }
  }
  return stats;
}

void reset_peak_allocator_stats(int device) {
  std::lock_guard<std::mutex> lock(allocator().mutex);
  AllocatorStats& stats = allocator().cache(device).stats;
  for (Stat* family : {stats.allocated_bytes, stats.requested_bytes, stats.reserved_bytes, stats.active,
                       stats.active_bytes, stats.segment, stats.allocation}) {
    for (int pool = 0; pool < kPoolKinds; ++pool) family[pool].peak = family[pool].current;
  }
}

void empty_cache() {
  ensure_usable_after_fork("empty the CUDA memory cache");
  refuse_during_any_capture("adcuda.cuda.empty_cache()");
  std::size_t devices = 0;
  {
    std::lock_guard<std::mutex> lock(allocator().mutex);
    devices = allocator().devices.size();
  }
  for (std::size_t device = 0; device < devices; ++device) {
    wait_for_pending(static_cast<int>(device));
    release_free_segments(static_cast<int>(device));
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
