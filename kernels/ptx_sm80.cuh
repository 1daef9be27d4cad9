// Inline-PTX wrappers for the sm_80 instructions the tensor-core kernels share (GEMM, attention,
// convolution): cp.async, ldmatrix and mma.sync.m16n8k16; and ex2.approx (attention, the fused classifier). Under ADCUDA_EMULATION each calls the
// emulator's version (kernels/emulator/ptx_sm80.h), written from the PTX ISA.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(ADCUDA_EMULATION)
#include "emulator/ptx_sm80.h"
#endif

namespace adcuda::ptx {

#if !defined(ADCUDA_EMULATION)
__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}
#endif

// 2^x by the special-function unit (ex2.approx.ftz.f32: one MUFU.EX2; relative error ~2^-22, -inf -> 0,
// results below 2^-126 flushed to 0).
__device__ __forceinline__ float exp2_approx(float x) {
#if defined(ADCUDA_EMULATION)
  return emu::ex2_approx_ftz_f32(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// cp.async.cg of 16 bytes global -> shared; bytes past `src_bytes` (0..16) are zero-filled and the
// source is not read at all when it is 0.
__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src, int src_bytes) {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_16(shared_dst, global_src, src_bytes);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared_dst)),
               "l"(global_src), "r"(src_bytes));
#endif
}

// cp.async.cg of 16 bytes global -> shared, or 16 zero bytes without reading the source when `zero` is
// set (the ignore-src predicate: the predicate goes straight to the LDGSTS, where a run-time src-size
// costs address arithmetic per copy).
__device__ __forceinline__ void cp_async_16_or_zero(void* shared_dst, const void* global_src, bool zero) {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_16(shared_dst, global_src, zero ? 0 : 16);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\ncp.async.cg.shared.global [%0], [%1], 16, p;\n}\n" ::"r"(
          shared_address(shared_dst)),
      "l"(global_src), "r"(static_cast<int>(zero)));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_wait(kPending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// ldmatrix .m8n8.x4 (.trans): lane 8 m + r gives the address of row r of 8x8 matrix m; register m
// receives that matrix's fragment (transposed with kTranspose).
template <bool kTranspose>
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* shared_row) {
#if defined(ADCUDA_EMULATION)
  emu::ldmatrix_x4(kTranspose, r, shared_row);
#else
  if constexpr (kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(shared_row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(shared_row)));
  }
#endif
}

// d += a * b for one m16n8k16 tile, fp32 accumulators, T = __half or __nv_bfloat16 inputs.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
#if defined(ADCUDA_EMULATION)
  emu::mma_m16n8k16(std::is_same_v<T, __half> ? emu::MmaInputType::kF16 : emu::MmaInputType::kBF16, d, a, b0, b1);
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

}  // namespace adcuda::ptx
