// Emulations of the sm_90a inline PTX in kernels/ptx_sm90.cuh, for the ADCUDA_EMULATION build: each
// call is made by one emulated CUDA thread, like the instruction it stands for. The semantics live in
// ptx_sm90_semantics.h (pure functions, tested on their own); this file gives them the block's shared
// memory and the asynchrony:
//   - a TMA load is queued on its mbarrier and lands only when a thread waits on that barrier (or the
//     block ends), so a consumer that reads a stage without waiting reads the 0xff fill, and a
//     producer that refills a stage before its consumers released it overwrites what they read;
//   - mbarrier waits block the emulated thread until the phase completes (the scheduler polls it; a
//     wait that can never complete is reported as a deadlock);
//   - wgmma.mma_async is queued in the thread's open group and performed (reading shared memory and
//     the accumulators then) only by the wgmma.wait_group that retires its group.
// Shared addresses are offsets into the launch's dynamic shared memory, the only shared memory these
// instructions may name here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "emulator/grid.h"
#include "emulator/ptx_sm90_semantics.h"

namespace adcuda::emu {

// The shared-window address of a pointer into the launch's dynamic shared memory.
inline std::uint32_t shared_window_address(const void* pointer, const char* what) {
  const unsigned char* base = dynamic_shared_memory();
  const auto* p = static_cast<const unsigned char*>(pointer);
  if (base == nullptr || p < base || p >= base + dynamic_shared_memory_bytes()) {
    kernel_fault((std::string(what) + ": the address is not in the launch's dynamic shared memory").c_str());
  }
  return static_cast<std::uint32_t>(p - base);
}

inline std::uint64_t& mbarrier_word(void* bar, const char* what) {
  const std::uint32_t at = shared_window_address(bar, what);
  if (at % 8 != 0) kernel_fault((std::string(what) + ": an mbarrier must be 8-byte aligned").c_str());
  return *static_cast<std::uint64_t*>(bar);
}

inline void mbarrier_init(void* bar, unsigned count) { emu::mbarrier_init(mbarrier_word(bar, "mbarrier.init"), count); }

inline void mbarrier_arrive(void* bar) { emu::mbarrier_arrive(mbarrier_word(bar, "mbarrier.arrive")); }

inline void mbarrier_arrive_expect_tx(void* bar, unsigned bytes) {
  emu::mbarrier_arrive(mbarrier_word(bar, "mbarrier.arrive.expect_tx"), 1, bytes);
}

// mbarrier.try_wait.parity in a loop until it succeeds.
inline void mbarrier_wait_parity(void* bar, unsigned parity) {
  std::uint64_t& word = mbarrier_word(bar, "mbarrier.try_wait.parity");
  const std::function<bool()> ready = [&word, bar, parity] {
    run_block_work(bar);
    return mbarrier_test_wait_parity(word, parity);
  };
  wait_until(ready, "mbarrier.try_wait.parity");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
inline void tma_load_2d(void* dst, const void* tensor_map, void* bar, int c0, int c1) {
  TensorMap2d map;
  std::memcpy(&map, tensor_map, sizeof map);
  if (map.magic != kTensorMapMagic) kernel_fault("cp.async.bulk.tensor: the operand is not a tensor map");
  const std::uint32_t at = shared_window_address(dst, "cp.async.bulk.tensor");
  if (at + tensor_map_box_bytes(map) > dynamic_shared_memory_bytes()) {
    kernel_fault("cp.async.bulk.tensor: the box runs past the end of the dynamic shared memory");
  }
  std::uint64_t& word = mbarrier_word(bar, "cp.async.bulk.tensor (its mbarrier)");
  unsigned char* shared = dynamic_shared_memory();
  defer_block_work(bar, [map, shared, at, c0, c1, &word] {
    mbarrier_complete_tx(word, emu::tma_load_2d(map, shared, at, c0, c1));
  });
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: queued; d is read and written when its group
// is retired by wgmma_wait_group.
inline void wgmma_mma_async(MmaInputType type, int n, float* d, std::uint64_t a_desc, std::uint64_t b_desc,
                            bool scale_d) {
  const int thread = current_thread().linear % 128;
  const unsigned char* shared = dynamic_shared_memory();
  if (shared == nullptr) kernel_fault("wgmma.mma_async: the launch has no dynamic shared memory");
  async_ops().open.push_back([=] { wgmma_m64nNk16_thread(type, n, a_desc, b_desc, scale_d, shared, thread, d); });
}

inline void wgmma_commit_group() {
  AsyncOpGroups& groups = async_ops();
  groups.committed.push_back(std::move(groups.open));
  groups.open.clear();
}

// Retires every committed group but the newest `pending`, oldest first.
inline void wgmma_wait_group(int pending) {
  AsyncOpGroups& groups = async_ops();
  while (groups.committed.size() > static_cast<std::size_t>(pending)) {
    std::vector<std::function<void()>> group = std::move(groups.committed.front());
    groups.committed.erase(groups.committed.begin());
    for (auto& op : group) op();
  }
}

}  // namespace adcuda::emu
