// Inline-PTX wrappers for the sm_90a instructions of kernels/gemm_sm90.cu: mbarrier, TMA
// (cp.async.bulk.tensor), wgmma and setmaxnreg, and the host-side tensor map. (The GEMM writes no
// shared memory through the generic proxy that TMA or wgmma then read, so it needs no
// fence.proxy.async; the emulator has no memory model to order with one.) Real
// PTX needs the arch-specific feature set (__CUDA_ARCH_FEAT_SM90_ALL: a `90a` build); under
// ADCUDA_EMULATION each calls the emulator's version (kernels/emulator/ptx_sm90.h), written from the PTX
// ISA. In any other device compilation the wrappers are empty and the kernels that use them must not
// run (gemm_sm90.cu probes that once per device).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#if defined(ADCUDA_EMULATION)
#include "emulator/ptx_sm90.h"
#ifndef __grid_constant__
#define __grid_constant__
#endif
#else
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ADCUDA_SM90A_PTX 1
#endif

namespace adcuda::ptx::sm90 {

// A tensor map as a kernel parameter (pass it `const __grid_constant__`): CUtensorMap's 128 opaque
// bytes from cuTensorMapEncodeTiled, or the emulator's own encoding.
struct alignas(64) TensorMap {
  unsigned char bytes[128];
};

#if defined(ADCUDA_SM90A_PTX)
__device__ __forceinline__ std::uint32_t smem(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}
#endif

// The shared-window address of a shared-memory pointer (what descriptors and TMA name).
__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
#if defined(ADCUDA_EMULATION)
  return emu::shared_window_address(pointer, "wgmma descriptor");
#elif defined(ADCUDA_SM90A_PTX)
  return smem(pointer);
#else
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(pointer));
#endif
}

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned count) {
#if defined(ADCUDA_EMULATION)
  emu::mbarrier_init(bar, count);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem(bar)), "r"(count));
#endif
}

// Makes initialised mbarriers visible to the async proxy (TMA) and the other threads (with the
// __syncthreads that follows it).
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(ADCUDA_SM90A_PTX)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
#if defined(ADCUDA_EMULATION)
  emu::mbarrier_arrive(bar);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem(bar)) : "memory");
#endif
}

// Arrives and announces `bytes` transaction bytes (the TMA loads that complete them follow).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
#if defined(ADCUDA_EMULATION)
  emu::mbarrier_arrive_expect_tx(bar, bytes);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem(bar)), "r"(bytes) : "memory");
#endif
}

// Waits until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity) {
#if defined(ADCUDA_EMULATION)
  emu::mbarrier_wait_parity(bar, parity);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem(bar)),
      "r"(parity)
      : "memory");
#endif
}

// TMA: the box at (c0 innermost, c1) of `map` into shared `dst`, completing its bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, std::uint64_t* bar, int c0, int c1) {
#if defined(ADCUDA_EMULATION)
  emu::tma_load_2d(dst, map, bar, c0, c1);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(smem(dst)), "l"(reinterpret_cast<std::uint64_t>(map)), "r"(smem(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}

// Register budget changes of a whole warpgroup (setmaxnreg.{inc,dec}.sync.aligned.u32).
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(ADCUDA_SM90A_PTX)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(ADCUDA_SM90A_PTX)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

// A shared-memory matrix descriptor for a K-major operand in the 128-byte swizzle: rows of 128 bytes
// (64 half elements), groups of 8 rows 1024 bytes apart (SBO); LBO is unused by this layout (1 by
// convention). `address` is the shared address of the k16 slice's first row.
__host__ __device__ __forceinline__ std::uint64_t kmajor_sw128_descriptor(std::uint32_t address) {
  return (static_cast<std::uint64_t>((address >> 4) & 0x3fffu)) | (std::uint64_t(1) << 16) |
         (std::uint64_t(1024 >> 4) << 32) | (std::uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(ADCUDA_SM90A_PTX)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit_group() {
#if defined(ADCUDA_EMULATION)
  emu::wgmma_commit_group();
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
#if defined(ADCUDA_EMULATION)
  emu::wgmma_wait_group(kPending);
#elif defined(ADCUDA_SM90A_PTX)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// d (64 x 128 over the warpgroup, 64 floats per thread) = A (64 x 16) * B (16 x 128) + (scale_d ? d : 0),
// both operands K-major in shared memory (descriptors), T = __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], std::uint64_t a_desc, std::uint64_t b_desc,
                                                 bool scale_d) {
#if defined(ADCUDA_EMULATION)
  emu::wgmma_mma_async(std::is_same_v<T, __half> ? emu::MmaInputType::kF16 : emu::MmaInputType::kBF16, 128, d,
                       a_desc, b_desc, scale_d);
#elif defined(ADCUDA_SM90A_PTX)
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(scale_d)));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(scale_d)));
  }
#endif
}

#if !defined(ADCUDA_EMULATION)
// Host: a 2-d tensor map over a row-major (dim1 x dim0) matrix of 16-bit elements whose rows are
// `row_stride_bytes` apart, read in box0 x box1 boxes in the 128-byte swizzle, zeros outside. The
// driver's cuTensorMapEncodeTiled is found through the runtime's entry-point query, so nothing links
// against libcuda. Returns the CUresult (0: success).
inline int encode_tensor_map_2d(TensorMap* out, const void* global, bool bf16, std::uint64_t dim0, std::uint64_t dim1,
                                std::uint64_t row_stride_bytes, std::uint32_t box0, std::uint32_t box1) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      function = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  if (encode == nullptr) return static_cast<int>(CUDA_ERROR_NOT_FOUND);
  const cuuint64_t dims[2] = {dim0, dim1};
  const cuuint64_t strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t element_strides[2] = {1, 1};
  return static_cast<int>(encode(reinterpret_cast<CUtensorMap*>(out),
                                 bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                                 const_cast<void*>(global), dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}
#elif defined(ADCUDA_EMULATION)
inline int encode_tensor_map_2d(TensorMap* out, const void* global, bool, std::uint64_t dim0, std::uint64_t dim1,
                                std::uint64_t row_stride_bytes, std::uint32_t box0, std::uint32_t box1) {
  const emu::TensorMap2d map = emu::encode_tensor_map_2d(global, 2, dim0, dim1, row_stride_bytes, box0, box1, 128);
  static_assert(sizeof(map) == sizeof(TensorMap), "the emulator's tensor map fills a TensorMap");
  std::memcpy(out->bytes, &map, sizeof map);
  return 0;
}
#endif

}  // namespace adcuda::ptx::sm90
