#include "runtime/process.h"

#include <pthread.h>

#include <atomic>
#include <string>

#include "runtime/errors.h"

namespace adcuda {
namespace {

std::atomic<bool> cuda_used{false};
std::atomic<bool> bad_fork{false};

void mark_child_after_fork() {
  if (cuda_used.load(std::memory_order_relaxed)) bad_fork.store(true, std::memory_order_relaxed);
}

// Registered when the module is loaded, before any CUDA call can happen.
[[maybe_unused]] const int fork_handler_registered = pthread_atfork(nullptr, nullptr, &mark_child_after_fork);

}  // namespace

void note_cuda_used() { cuda_used.store(true, std::memory_order_relaxed); }

bool cuda_was_used() noexcept { return cuda_used.load(std::memory_order_relaxed); }

bool in_bad_fork() noexcept { return bad_fork.load(std::memory_order_relaxed); }

void ensure_usable_after_fork(const char* what) {
  if (in_bad_fork()) {
    throw ForkedProcessError(
        std::string(what) +
        ": CUDA cannot be used in a process forked after its parent initialised CUDA (the child inherits a "
        "CUDA state it cannot use). Start worker processes with the 'spawn' or 'forkserver' start method "
        "(multiprocessing.get_context('spawn'), or DataLoader(multiprocessing_context='spawn')).");
  }
}

}  // namespace adcuda
