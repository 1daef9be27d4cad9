#include "emulator/grid.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "emulator/cudart_state.h"
#include "emulator/fiber.h"
#include "emulator/ptx_sm80_semantics.h"

namespace adcuda::emu {
namespace {

// Per-thread stacks: kernels keep register tiles (arrays of a few hundred floats) on them.
constexpr std::size_t kFiberStackBytes = 256 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;

struct KernelFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct WarpState {
  unsigned arrived = 0;
  unsigned expected = 0;
  std::uint64_t generation = 0;
  int readers_left = 0;  // lanes yet to copy out the last completed exchange
  std::size_t bytes = 0;
  const char* what = "";
  std::vector<unsigned char> staging;
  unsigned live = 0;
};

struct BlockState {
  int live = 0;
  int arrived = 0;
  std::uint64_t generation = 0;
  int reduce_accumulator = 0;
  int reduce_result = 0;
  WarpState warps[kMaxThreadsPerBlock / 32];
  std::vector<std::pair<const void*, std::function<void()>>> deferred;  // defer_block_work, oldest first
};

enum class Order { kForward, kReverse, kRandom };

struct Schedule {
  Order order = Order::kForward;
  std::uint64_t seed = 0;
};

Schedule schedule_from_environment() {
  Schedule schedule;
  const char* text = std::getenv("ADCUDA_EMULATOR_SCHEDULE");
  if (!text || !*text || std::strcmp(text, "forward") == 0) return schedule;
  if (std::strcmp(text, "reverse") == 0) {
    schedule.order = Order::kReverse;
  } else if (std::strncmp(text, "random", 6) == 0) {
    schedule.order = Order::kRandom;
    schedule.seed = text[6] == ':' ? std::strtoull(text + 7, nullptr, 10) : 0;
  } else {
    std::fprintf(stderr, "adcuda emulator: ignoring ADCUDA_EMULATOR_SCHEDULE=%s (forward, reverse or random[:seed])\n",
                 text);
  }
  return schedule;
}

// Everything a running grid uses; one per host thread that runs grids (each stream's own thread).
struct Engine {
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<ThreadContext> threads;
  BlockState block;
  std::vector<unsigned char> dynamic_shared;
  ThreadContext* current = nullptr;
  const std::function<void()>* body = nullptr;
  std::exception_ptr fault;
  std::mt19937_64 random;
};

thread_local Engine* tls_engine = nullptr;

Engine& engine() {
  if (!tls_engine) throw std::logic_error("adcuda emulator: device function called outside a kernel launch");
  return *tls_engine;
}

std::string describe(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

void yield_current() {
  Engine& e = engine();
  Fiber& fiber = *e.fibers[e.current->linear];
  fiber.yield();
}

void thread_entry(void* argument) {
  auto* context = static_cast<ThreadContext*>(argument);
  Engine& e = *tls_engine;
  try {
    (*e.body)();
    // A cp.async the thread never waited for still lands (the hardware completes it).
    if (!context->async.open.empty()) commit_async_group(context->async);
    wait_async_groups(context->async, 0);
  } catch (...) {
    if (!e.fault) e.fault = std::current_exception();
  }
  context->done = true;
  for (;;) e.fibers[context->linear]->yield();
}

bool runnable(const Engine& e, const ThreadContext& t) {
  if (t.done) return false;
  switch (t.wait) {
    case Wait::kNone: return true;
    case Wait::kBlockBarrier: return e.block.generation != t.wait_generation;
    case Wait::kWarpBarrier: return e.block.warps[t.warp].generation != t.wait_generation;
    case Wait::kWarpDrain: return e.block.warps[t.warp].readers_left == 0;
    case Wait::kPoll: return (*t.poll)();
  }
  return false;
}

void release_block_barrier(BlockState& block) {
  block.reduce_result = block.reduce_accumulator;
  block.reduce_accumulator = 0;
  block.arrived = 0;
  ++block.generation;
}

std::string describe_deadlock(const Engine& e) {
  std::string message = "adcuda emulator: deadlock in block " + describe(e.threads[0].block_idx) + ": ";
  int listed = 0;
  for (const ThreadContext& t : e.threads) {
    if (t.done) continue;
    if (listed++ == 6) {
      message += "...";
      break;
    }
    message += "thread " + describe(t.thread_idx) + " waits at ";
    if (t.wait == Wait::kBlockBarrier) {
      message += "__syncthreads; ";
    } else if (t.wait == Wait::kPoll) {
      message += std::string(t.poll_what) + "; ";
    } else {
      const WarpState& w = e.block.warps[t.warp];
      char mask[64];
      std::snprintf(mask, sizeof mask, " (mask 0x%08x, arrived 0x%08x, live lanes 0x%08x); ", w.expected, w.arrived,
                    w.live);
      message += std::string(w.what) + mask;
    }
  }
  return message + "a barrier that cannot complete (a lane of the mask exited or waits at another barrier)";
}

void run_block(Engine& e, const LaunchConfig& config, const uint3& block_idx, const Schedule& schedule) {
  const int n = static_cast<int>(config.block.x * config.block.y * config.block.z);
  e.block.live = n;
  e.block.arrived = 0;
  e.block.reduce_accumulator = 0;
  e.block.deferred.clear();  // a failed launch may have left some
  const int warps = (n + 31) / 32;
  for (int w = 0; w < warps; ++w) {
    WarpState& warp = e.block.warps[w];
    warp.arrived = 0;
    warp.readers_left = 0;
    const int lanes = std::min(32, n - w * 32);
    warp.live = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  }
  if (!e.dynamic_shared.empty()) std::memset(e.dynamic_shared.data(), 0xff, e.dynamic_shared.size());
  for (int i = 0; i < n; ++i) {
    ThreadContext& t = e.threads[i];
    t.thread_idx = uint3{static_cast<unsigned>(i % config.block.x),
                         static_cast<unsigned>((i / config.block.x) % config.block.y),
                         static_cast<unsigned>(i / (config.block.x * config.block.y))};
    t.block_idx = block_idx;
    t.block_dim = config.block;
    t.grid_dim = config.grid;
    t.linear = i;
    t.lane = i % 32;
    t.warp = i / 32;
    t.done = false;
    t.wait = Wait::kNone;
    t.async.open.clear();
    t.async.committed.clear();
    t.async_ops.open.clear();
    t.async_ops.committed.clear();
    t.poll = nullptr;
    e.fibers[i]->reset(&thread_entry, &t);
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (schedule.order == Order::kReverse) std::reverse(order.begin(), order.end());
  int live = n;
  while (live > 0) {
    if (schedule.order == Order::kRandom) std::shuffle(order.begin(), order.end(), e.random);
    bool progressed = false;
    for (int i : order) {
      ThreadContext& t = e.threads[i];
      if (!runnable(e, t)) continue;
      t.wait = Wait::kNone;
      e.current = &t;
      e.fibers[i]->resume();
      e.current = nullptr;
      progressed = true;
      if (e.fault) return;
      if (t.done) {
        --live;
        --e.block.live;
        e.block.warps[t.warp].live &= ~(1u << t.lane);
        // Exited threads no longer hold up __syncthreads.
        if (e.block.arrived > 0 && e.block.arrived == e.block.live) release_block_barrier(e.block);
      }
    }
    if (!progressed) throw KernelFault(describe_deadlock(e));
  }
  // Copies nobody waited for still land before the next block reuses the shared memory.
  while (!e.block.deferred.empty()) run_block_work(e.block.deferred.front().first);
}

const char* check_config(const LaunchConfig& c, std::size_t max_dynamic_shared) {
  const std::uint64_t threads = std::uint64_t(c.block.x) * c.block.y * c.block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64) {
    return "invalid block dimensions";
  }
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 ||
      c.grid.z > 65535) {
    return "invalid grid dimensions";
  }
  if (c.shared_bytes > max_dynamic_shared) return "too much dynamic shared memory";
  return nullptr;
}

}  // namespace

ThreadContext& current_thread() { return *engine().current; }

int block_barrier(int predicate, int kind) {
  Engine& e = engine();
  ThreadContext& t = *e.current;
  BlockState& block = e.block;
  switch (kind) {
    case 1: block.reduce_accumulator += predicate != 0; break;
    case 2: block.reduce_accumulator += predicate == 0; break;  // counts failures
    case 3: block.reduce_accumulator += predicate != 0; break;
    default: break;
  }
  ++block.arrived;
  if (block.arrived == block.live) {
    release_block_barrier(block);
  } else {
    t.wait = Wait::kBlockBarrier;
    t.wait_generation = block.generation;
    yield_current();
  }
  switch (kind) {
    case 1: return block.reduce_result;
    case 2: return block.reduce_result == 0;
    case 3: return block.reduce_result != 0;
    default: return 0;
  }
}

void warp_gather(unsigned mask, const void* in, std::size_t bytes, void* all, const char* what) {
  Engine& e = engine();
  ThreadContext& t = *e.current;
  WarpState& warp = e.block.warps[t.warp];
  const unsigned bit = 1u << t.lane;
  if (!(mask & bit)) {
    kernel_fault((std::string(what) + ": the calling lane " + std::to_string(t.lane) +
                  " is not in its own mask (undefined on the GPU)").c_str());
  }
  // The previous exchange's results must be read by every lane before the staging is reused.
  while (warp.readers_left > 0) {
    t.wait = Wait::kWarpDrain;
    yield_current();
  }
  if (warp.arrived == 0) {
    warp.expected = mask;
    warp.bytes = bytes;
    warp.what = what;
    if (warp.staging.size() < 32 * bytes) warp.staging.resize(32 * bytes);
  } else if (warp.expected != mask || warp.bytes != bytes) {
    char text[160];
    std::snprintf(text, sizeof text, "%s: lanes of warp %d disagree on the mask (0x%08x vs 0x%08x) or operation",
                  what, t.warp, warp.expected, mask);
    kernel_fault(text);
  }
  std::memcpy(warp.staging.data() + t.lane * bytes, in, bytes);
  warp.arrived |= bit;
  if (warp.arrived == warp.expected) {
    warp.arrived = 0;
    warp.readers_left = __builtin_popcount(warp.expected);
    ++warp.generation;
  } else {
    t.wait = Wait::kWarpBarrier;
    t.wait_generation = warp.generation;
    yield_current();
  }
  for (int lane = 0; lane < 32; ++lane) {
    if (mask & (1u << lane)) {
      std::memcpy(static_cast<unsigned char*>(all) + lane * bytes, warp.staging.data() + lane * bytes, bytes);
    }
  }
  --warp.readers_left;
}

unsigned live_lanes() {
  Engine& e = engine();
  return e.block.warps[e.current->warp].live;
}

AsyncCopyState& async_copies() { return engine().current->async; }

AsyncOpGroups& async_ops() { return engine().current->async_ops; }

void wait_until(const std::function<bool()>& ready, const char* what) {
  Engine& e = engine();
  ThreadContext& t = *e.current;
  while (!ready()) {
    t.wait = Wait::kPoll;
    t.poll = &ready;
    t.poll_what = what;
    yield_current();
  }
  t.poll = nullptr;
}

void defer_block_work(const void* key, std::function<void()> work) {
  engine().block.deferred.emplace_back(key, std::move(work));
}

void run_block_work(const void* key) {
  auto& deferred = tls_engine->block.deferred;
  // Taken out before running: the work may queue more.
  std::vector<std::function<void()>> due;
  for (auto it = deferred.begin(); it != deferred.end();) {
    if (it->first == key) {
      due.push_back(std::move(it->second));
      it = deferred.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& work : due) work();
}

unsigned char* dynamic_shared_memory() {
  Engine& e = engine();
  return e.dynamic_shared.empty() ? nullptr : e.dynamic_shared.data();
}

std::size_t dynamic_shared_memory_bytes() { return engine().dynamic_shared.size(); }

void kernel_fault(const char* what) { throw KernelFault(what); }

namespace {

// Runs the whole grid now, on the calling host thread (a stream's thread).
void run_grid_now(const LaunchConfig& config, const std::function<void()>& thread_body) {
  thread_local Engine local_engine;
  Engine& e = local_engine;
  Engine* previous = tls_engine;
  tls_engine = &e;
  const int n = static_cast<int>(config.block.x * config.block.y * config.block.z);
  while (static_cast<int>(e.fibers.size()) < n) e.fibers.push_back(std::make_unique<Fiber>(kFiberStackBytes));
  e.threads.resize(n);  // exactly the block's threads: the scheduler and the deadlock report walk them all
  e.body = &thread_body;
  e.fault = nullptr;
  e.dynamic_shared.assign(config.shared_bytes, 0xff);
  const Schedule schedule = schedule_from_environment();
  e.random.seed(schedule.seed);
  const std::uint64_t blocks = std::uint64_t(config.grid.x) * config.grid.y * config.grid.z;
  std::string failure;
  try {
    for (std::uint64_t b = 0; b < blocks && !e.fault; ++b) {
      const std::uint64_t index = schedule.order == Order::kReverse ? blocks - 1 - b : b;
      const uint3 block_idx{static_cast<unsigned>(index % config.grid.x),
                            static_cast<unsigned>((index / config.grid.x) % config.grid.y),
                            static_cast<unsigned>(index / (std::uint64_t(config.grid.x) * config.grid.y))};
      run_block(e, config, block_idx, schedule);
    }
    if (e.fault) std::rethrow_exception(e.fault);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  tls_engine = previous;
  if (!failure.empty()) {
    std::fprintf(stderr, "adcuda emulator: kernel failed: %s\n", failure.c_str());
    record_asynchronous_error(cudaErrorLaunchFailure, failure.c_str());
  }
}

}  // namespace

void launch_grid(const void* kernel, const LaunchConfig& config, std::function<void()> thread_body) {
  const char* bad = check_config(config, max_dynamic_shared_bytes(kernel));
  if (bad) {
    record_launch_error(cudaErrorInvalidConfiguration, bad);
    return;
  }
  const LaunchConfig copy = config;
  const cudaError_t queued =
      enqueue(config.stream, [copy, body = std::move(thread_body)] { run_grid_now(copy, body); }, kernel);
  if (queued == cudaErrorInvalidResourceHandle) {
    record_launch_error(queued, "kernel launched on a destroyed or unknown stream");
  } else if (queued != cudaSuccess) {
    record_launch_error(queued, "kernel launched into a stream capture that an earlier illegal call invalidated");
  }
}

}  // namespace adcuda::emu
