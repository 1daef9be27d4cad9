#include "emulator/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define ADCUDA_EMU_UCONTEXT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADCUDA_EMU_UCONTEXT 1
#endif
#endif
#if !defined(ADCUDA_EMU_UCONTEXT) && !defined(__x86_64__)
#define ADCUDA_EMU_UCONTEXT 1
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

#if defined(ADCUDA_EMU_UCONTEXT)

void Fiber::reset(Entry entry, void* argument) {
  getcontext(&state_->fiber_context);
  state_->fiber_context.uc_stack.ss_sp = state_->stack_low;
  state_->fiber_context.uc_stack.ss_size = state_->stack_bytes;
  state_->fiber_context.uc_link = nullptr;
  // makecontext passes int arguments: the pointer travels as two halves.
  const auto bits = reinterpret_cast<std::uintptr_t>(argument);
  using Start = void (*)(unsigned, unsigned, unsigned, unsigned);
  static const Start start = [](unsigned entry_lo, unsigned entry_hi, unsigned arg_lo, unsigned arg_hi) {
    const auto e = reinterpret_cast<Entry>((std::uintptr_t(entry_hi) << 32) | entry_lo);
    e(reinterpret_cast<void*>((std::uintptr_t(arg_hi) << 32) | arg_lo));
  };
  const auto entry_bits = reinterpret_cast<std::uintptr_t>(entry);
  makecontext(&state_->fiber_context, reinterpret_cast<void (*)()>(start), 4, unsigned(entry_bits),
              unsigned(entry_bits >> 32), unsigned(bits), unsigned(bits >> 32));
}

void Fiber::resume() { swapcontext(&state_->caller_context, &state_->fiber_context); }

void Fiber::yield() { swapcontext(&state_->fiber_context, &state_->caller_context); }

#else

void Fiber::reset(Entry entry, void* argument) {
  // The stack as adcuda_emu_switch expects to find it: control words, six callee-saved registers
  // (r12 = entry, r13 = argument for the trampoline), then the return address. After `ret` pops the
  // trampoline's address the stack pointer is 16-byte aligned, as the ABI wants at its call.
  auto* top = reinterpret_cast<std::uint64_t*>(
      (reinterpret_cast<std::uintptr_t>(state_->stack_low + state_->stack_bytes) & ~std::uintptr_t(15)));
  std::uint64_t* sp = top - 2;  // 16 bytes of headroom, keeps the alignment
  *--sp = reinterpret_cast<std::uint64_t>(&adcuda_emu_fiber_trampoline);
  *--sp = 0;                                            // rbp
  *--sp = 0;                                            // rbx
  *--sp = reinterpret_cast<std::uint64_t>(entry);       // r12
  *--sp = reinterpret_cast<std::uint64_t>(argument);    // r13
  *--sp = 0;                                            // r14
  *--sp = 0;                                            // r15
  std::uint32_t mxcsr = 0;
  std::uint16_t x87 = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87));
  *--sp = std::uint64_t(mxcsr) | (std::uint64_t(x87) << 32);
  state_->fiber_sp = sp;
}

void Fiber::resume() { adcuda_emu_switch(&state_->caller_sp, state_->fiber_sp); }

void Fiber::yield() { adcuda_emu_switch(&state_->fiber_sp, state_->caller_sp); }

#endif

}  // namespace adcuda::emu
