// Fibers: one per emulated CUDA thread, so that a thread can stop at __syncthreads or a warp shuffle
// and let the others of its block catch up. Cooperative and single-OS-threaded: a fiber runs until it
// yields back to the scheduler, which is what makes barriers exact and runs deterministic.
//
// On x86-64 the switch is a few instructions (kernels/emulator/fiber.cpp); elsewhere it falls back to
// ucontext. Under AddressSanitizer every switch is announced to it (__sanitizer_*_switch_fiber).
#pragma once

#include <cstddef>
#include <memory>

namespace adcuda::emu {

class Fiber {
 public:
  using Entry = void (*)(void* argument);

  // A fiber of `stack_bytes` (plus a guard page) that runs entry(argument) when first resumed. The
  // entry must never return: it ends by switching back for good (yield_to_scheduler after finishing).
  Fiber(std::size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to start entry(argument) afresh on its (reused) stack.
  void reset(Entry entry, void* argument);
  // From the scheduler: run the fiber until it yields.
  void resume();
  // From inside the fiber: back to whoever resumed it.
  void yield();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace adcuda::emu
