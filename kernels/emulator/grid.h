// The emulator's execution model: how a kernel launch runs on the CPU.
//
// A launch runs its blocks one after another, on the host thread that serves its stream. Within a block every CUDA thread is a fiber (emulator/fiber.h) that
// runs until it finishes or reaches a barrier: __syncthreads (all live threads of the block), a warp
// collective (__shfl*_sync, __ballot_sync, __syncwarp, ...: all lanes of its mask) or an emulated PTX
// collective (warp_collective below). A barrier nobody can complete (a lane of the mask exited or waits
// at another barrier) fails the launch with a description of who waits where, instead of hanging.
//
// `__shared__` variables are thread_local function statics (a stream's blocks run one at a time on its
// thread, so each block sees its own);
// dynamic shared memory is a per-launch buffer filled with 0xff bytes before every block, so a kernel
// that reads shared memory it never wrote sees NaNs rather than a lucky zero.
//
// ADCUDA_EMULATOR_SCHEDULE=forward (default), reverse or random[:seed] sets the order in which the
// scheduler resumes the threads of a block and runs the blocks: a kernel whose result changes with it
// is missing a barrier.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace adcuda::emu {

// A cp.async issued by the calling thread and not yet performed (see ptx_sm80.h).
struct AsyncCopy {
  void* dst;
  const void* src;
  int bytes;
  int src_bytes;
};
struct AsyncCopyState {
  std::vector<AsyncCopy> open;                    // issued since the last commit_group
  std::vector<std::vector<AsyncCopy>> committed;  // committed groups, oldest first
};

// Asynchronous operations a thread issued and has not waited for, in commit groups (wgmma.mma_async,
// see ptx_sm90.h): performed, oldest group first, by the thread's wait.
struct AsyncOpGroups {
  std::vector<std::function<void()>> open;                    // issued since the last commit
  std::vector<std::vector<std::function<void()>>> committed;  // committed groups, oldest first
};

enum class Wait { kNone, kBlockBarrier, kWarpBarrier, kWarpDrain, kPoll };

struct ThreadContext {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int linear = 0;  // x fastest, then y, z
  int lane = 0;
  int warp = 0;
  bool done = false;
  Wait wait = Wait::kNone;
  std::uint64_t wait_generation = 0;
  AsyncCopyState async;
  AsyncOpGroups async_ops;
  const std::function<bool()>* poll = nullptr;  // Wait::kPoll: runnable again once this returns true
  const char* poll_what = "";
};

ThreadContext& current_thread();

inline int lane_id() { return current_thread().lane; }

// __syncthreads and its counting forms: kind 0 plain, 1 count, 2 and, 3 or.
int block_barrier(int predicate, int kind);

// Every lane in `mask` contributes `bytes` bytes at `in`; returns once all of them have, with lane l's
// contribution at all + l * bytes for each lane l in `mask`.
void warp_gather(unsigned mask, const void* in, std::size_t bytes, void* all, const char* what);

// The lanes of the calling thread's warp that have not exited.
unsigned live_lanes();

// A warp-wide collective: every lane in `mask` calls it with its own `in`; lane L gets
// combine(inputs, L), where inputs[l] is lane l's `in` (value-initialised for lanes not in `mask`).
template <typename In, typename Out = In, typename Combine>
Out warp_collective(unsigned mask, const In& in, Combine combine, const char* what = "warp collective") {
  static_assert(std::is_trivially_copyable_v<In>, "warp_collective exchanges raw bytes");
  In all[32] = {};
  warp_gather(mask, &in, sizeof(In), all, what);
  return combine(all, lane_id());
}

// The calling thread's queued cp.async copies.
AsyncCopyState& async_copies();

// The calling thread's uncommitted and committed asynchronous operation groups.
AsyncOpGroups& async_ops();

// Blocks the calling thread until `ready()` returns true (an mbarrier's phase, ptx_sm90.h); the
// scheduler asks it each time it would resume the thread, and a block in which every live thread waits
// for something that never comes fails with a deadlock naming `what`.
void wait_until(const std::function<bool()>& ready, const char* what);

// Work the block's asynchronous units do on their own (a TMA copy landing): queued under `key` (its
// mbarrier), performed in order by run_block_work(key) when something waits on that key, and at the
// latest when the block ends, as the hardware completes every copy.
void defer_block_work(const void* key, std::function<void()> work);
void run_block_work(const void* key);

// The launch's dynamic shared memory (extern __shared__).
unsigned char* dynamic_shared_memory();
std::size_t dynamic_shared_memory_bytes();

// Raised inside a kernel (e.g. by __trap): the launch fails with this message.
[[noreturn]] void kernel_fault(const char* what);

// --- Launches --------------------------------------------------------------------------------------
// kernels/emulator/rewrite_launches.py turns `kernel<<<grid, block, bytes, stream>>>(args...)` into
// `kernel | ::adcuda::emu::LaunchConfig(grid, block, bytes, stream) | ::adcuda::emu::kernel_arguments(args...)`.

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes;
  cudaStream_t stream;
  LaunchConfig(dim3 grid_, dim3 block_, std::size_t shared_bytes_ = 0, cudaStream_t stream_ = nullptr)
      : grid(grid_), block(block_), shared_bytes(shared_bytes_), stream(stream_) {}
};

// Queues the grid on config.stream (kernels/emulator/cudart.cpp runs each stream's work in order on a
// thread of its own, so streams overlap as on a GPU); every emulated thread of the grid runs
// thread_body. A bad configuration sets the calling host thread's last CUDA error at once; a deadlock or
// a fault while it runs is reported by the next CUDA call, as an asynchronous error is on a GPU.
void launch_grid(const void* kernel, const LaunchConfig& config, std::function<void()> thread_body);

template <typename... Params>
struct PendingLaunch {
  void (*kernel)(Params...);
  LaunchConfig config;
};

template <typename... Params>
PendingLaunch<Params...> operator|(void (*kernel)(Params...), const LaunchConfig& config) {
  return {kernel, config};
}

template <typename... Args>
std::tuple<std::decay_t<Args>...> kernel_arguments(Args&&... args) {
  return std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
void operator|(const PendingLaunch<Params...>& launch, std::tuple<Args...>&& args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
  // Converted to the parameter types when the launch is queued, as CUDA copies the arguments then; each
  // emulated thread gets its own copy of the parameters.
  auto params = std::make_shared<std::tuple<Params...>>(std::apply(
      [](auto&&... values) { return std::tuple<Params...>(std::forward<decltype(values)>(values)...); },
      std::move(args)));
  void (*kernel)(Params...) = launch.kernel;
  launch_grid(reinterpret_cast<const void*>(kernel), launch.config, [kernel, params] {
    std::tuple<Params...> copy = *params;
    std::apply(kernel, copy);
  });
}

}  // namespace adcuda::emu
