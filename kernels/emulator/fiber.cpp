#include "emulator/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#if !defined(__x86_64__)
#define ADCUDA_EMU_UCONTEXT 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ADCUDA_EMU_ANNOTATE_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADCUDA_EMU_ANNOTATE_FIBERS 1
#endif
#endif
#if defined(ADCUDA_EMU_ANNOTATE_FIBERS)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(ADCUDA_EMU_UCONTEXT)
#include <ucontext.h>
#else
// adcuda_emu_switch(&save_sp, new_sp): saves the callee-saved registers, the SSE control word and the
// x87 control word on the current stack, stores the stack pointer in *save_sp, and continues on
// new_sp, which must have been saved the same way (or laid out by Fiber::reset).
extern "C" void adcuda_emu_switch(void** save_sp, void* new_sp);
extern "C" void adcuda_emu_fiber_trampoline();
asm(R"(
  .text
  .globl adcuda_emu_switch
  .type adcuda_emu_switch, @function
adcuda_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size adcuda_emu_switch, .-adcuda_emu_switch

  .globl adcuda_emu_fiber_trampoline
  .type adcuda_emu_fiber_trampoline, @function
adcuda_emu_fiber_trampoline:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size adcuda_emu_fiber_trampoline, .-adcuda_emu_fiber_trampoline
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace adcuda::emu {

struct Fiber::State {
  unsigned char* mapping = nullptr;
  std::size_t mapping_bytes = 0;
  unsigned char* stack_low = nullptr;  // above the guard page
  std::size_t stack_bytes = 0;
  Entry entry = nullptr;
  void* argument = nullptr;
  // For AddressSanitizer: the resumer's stack, as it told the fiber when it last switched in; and the
  // fake stacks (detect_stack_use_after_return) of whichever side is switched out.
  const void* caller_stack_bottom = nullptr;
  std::size_t caller_stack_bytes = 0;
  void* fiber_fake_stack = nullptr;
  void* caller_fake_stack = nullptr;
#if defined(ADCUDA_EMU_UCONTEXT)
  ucontext_t fiber_context{};
  ucontext_t caller_context{};
#else
  void* fiber_sp = nullptr;
  void* caller_sp = nullptr;
#endif
};

Fiber::Fiber(std::size_t stack_bytes) : state_(new State) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  stack_bytes = (stack_bytes + page - 1) / page * page;
  state_->mapping_bytes = stack_bytes + page;
  void* mapping = mmap(nullptr, state_->mapping_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  state_->mapping = static_cast<unsigned char*>(mapping);
  // A thread that overflows its stack faults on the guard page instead of corrupting a neighbour.
  mprotect(state_->mapping, page, PROT_NONE);
  state_->stack_low = state_->mapping + page;
  state_->stack_bytes = stack_bytes;
}

Fiber::~Fiber() { munmap(state_->mapping, state_->mapping_bytes); }

// AddressSanitizer must be told of every stack switch (the stack it will run on next, and from
// inside, the one it came from): otherwise it reports accesses to a fiber's stack as overflows and
// cannot unpoison the right stack when an exception unwinds.
namespace {
#if defined(ADCUDA_EMU_ANNOTATE_FIBERS)
void start_switch(void** fake_stack_save, const void* bottom, std::size_t bytes) {
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, bytes);
}
void finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_bytes) {
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_bytes);
}
// A finished thread's frames never returned, so their redzones are still poisoned: a reused stack
// starts clean.
void forget_frames(void* stack_low, std::size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(stack_low, bytes); }
#else
void start_switch(void**, const void*, std::size_t) {}
void finish_switch(void*, const void**, std::size_t*) {}
void forget_frames(void*, std::size_t) {}
#endif
}  // namespace

void Fiber::reset(Entry entry, void* argument) {
  state_->entry = entry;
  state_->argument = argument;
  state_->fiber_fake_stack = nullptr;  // a fresh start: nothing of the previous run's frames survives
  forget_frames(state_->stack_low, state_->stack_bytes);
  // What the fiber runs first: it learns the resumer's stack, then runs the entry.
  static const Entry start = [](void* state_address) {
    auto* state = static_cast<State*>(state_address);
    finish_switch(nullptr, &state->caller_stack_bottom, &state->caller_stack_bytes);
    state->entry(state->argument);
  };
#if defined(ADCUDA_EMU_UCONTEXT)
  getcontext(&state_->fiber_context);
  state_->fiber_context.uc_stack.ss_sp = state_->stack_low;
  state_->fiber_context.uc_stack.ss_size = state_->stack_bytes;
  state_->fiber_context.uc_link = nullptr;
  // makecontext passes int arguments: the state's address travels as two halves.
  using Start = void (*)(unsigned, unsigned);
  static const Start start_halves = [](unsigned state_lo, unsigned state_hi) {
    start(reinterpret_cast<void*>((std::uintptr_t(state_hi) << 32) | state_lo));
  };
  const auto bits = reinterpret_cast<std::uintptr_t>(state_.get());
  makecontext(&state_->fiber_context, reinterpret_cast<void (*)()>(start_halves), 2, unsigned(bits),
              unsigned(bits >> 32));
#else
  // The stack as adcuda_emu_switch expects to find it: control words, six callee-saved registers
  // (r12 = entry, r13 = argument for the trampoline), then the return address. After `ret` pops the
  // trampoline's address the stack pointer is 16-byte aligned, as the ABI wants at its call.
  auto* top = reinterpret_cast<std::uint64_t*>(
      (reinterpret_cast<std::uintptr_t>(state_->stack_low + state_->stack_bytes) & ~std::uintptr_t(15)));
  std::uint64_t* sp = top - 2;  // 16 bytes of headroom, keeps the alignment
  *--sp = reinterpret_cast<std::uint64_t>(&adcuda_emu_fiber_trampoline);
  *--sp = 0;                                               // rbp
  *--sp = 0;                                               // rbx
  *--sp = reinterpret_cast<std::uint64_t>(start);          // r12
  *--sp = reinterpret_cast<std::uint64_t>(state_.get());  // r13
  *--sp = 0;                                               // r14
  *--sp = 0;                                               // r15
  std::uint32_t mxcsr = 0;
  std::uint16_t x87 = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87));
  *--sp = std::uint64_t(mxcsr) | (std::uint64_t(x87) << 32);
  state_->fiber_sp = sp;
#endif
}

void Fiber::resume() {
  start_switch(&state_->caller_fake_stack, state_->stack_low, state_->stack_bytes);
#if defined(ADCUDA_EMU_UCONTEXT)
  swapcontext(&state_->caller_context, &state_->fiber_context);
#else
  adcuda_emu_switch(&state_->caller_sp, state_->fiber_sp);
#endif
  finish_switch(state_->caller_fake_stack, nullptr, nullptr);
}

void Fiber::yield() {
  start_switch(&state_->fiber_fake_stack, state_->caller_stack_bottom, state_->caller_stack_bytes);
#if defined(ADCUDA_EMU_UCONTEXT)
  swapcontext(&state_->fiber_context, &state_->caller_context);
#else
  adcuda_emu_switch(&state_->fiber_sp, state_->caller_sp);
#endif
  finish_switch(state_->fiber_fake_stack, &state_->caller_stack_bottom, &state_->caller_stack_bytes);
}

}  // namespace adcuda::emu
