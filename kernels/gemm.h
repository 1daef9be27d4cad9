// Matrix products on the GPU: the CUDA backend's `matmul` primitive (kernels/gemm.cu).
//
// Two paths compute the same products:
//   - cuBLASLt (gemm_cublaslt.cu), loaded at run time when the nvidia-cublas wheel or a CUDA
//     toolkit's libcublasLt.so.13 is present; used for the calls whose layout it can express (each
//     operand with a unit stride on one of its two dims, batch dims that collapse to one stride),
//     when the caller allows it;
//   - the hand-written kernels, which need nothing but this module and read operands through any
//     strides (a transposed view, a slice, a broadcast batch dim with stride 0 are multiplied in
//     place, never copied):
//       * fp16 / bf16 on compute capability 9.0 with sm_90a code in the build: TMA + wgmma +
//         mbarrier stages, warp-specialised, persistent (gemm_sm90.cu), for single products whose A
//         has K contiguous (B is copied into that form when it is not); otherwise
//       * fp16 / bf16 on sm_80+: the mma.sync tensor-core kernel (gemm_tensor_core.cu): 128x256x32
//         block tiles, 64x64 warp tiles, a 3-4 stage cp.async pipeline (realigned 16-byte register loads where
//         an operand's rows are not 16-byte aligned, e.g. 50257 wide; element loads where it has no
//         unit stride), fp32 accumulation, split-K for small
//         outputs with long K;
//       * fp32 / fp64 (and half types on a GPU without sm_80 code in this build): a shared-memory and
//         register-tiled SIMT kernel, 128x128x8 block tiles with 8x8 outputs per thread (64x64 tiles
//         with 4x4 when the problem is too small to fill the GPU).
// The epilogue adds an optional bias (per output column) and applies an optional activation, keeping
// the value before it when asked (what the activation's backward needs). Plain C++: included by the
// bindings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

// Applied to A @ B + bias. GELU's tanh form is the one cuBLASLt's GELU epilogues compute.
enum class GemmActivation : int { kNone = 0, kGeluTanh = 1 };

struct MatmulOptions {
  const DeviceArray* bias = nullptr;  // (N,), the operands' dtype, or nullptr
  GemmActivation activation = GemmActivation::kNone;
  bool save_preactivation = false;  // also return A @ B + bias before the activation
  bool allow_cublaslt = false;      // use cuBLASLt (if loaded) where it can express the call
};

struct MatmulResult {
  DeviceArray out;
  std::optional<DeviceArray> preactivation;
};

// a (..., M, K) @ b (..., K, N) with the batch dims broadcast -> new contiguous (batch..., M, N)
// arrays in a's dtype (a and b must share it). Floating point dtypes only.
MatmulResult matmul(const DeviceArray& a, const DeviceArray& b, const MatmulOptions& options = {});

// How many K splits the tensor-core kernel makes of an M x N x K product with `batch` entries on a GPU
// with `multiprocessors` SMs (1: none), unless ADCUDA_GEMM_SPLIT_K forces a count.
int tensor_core_split_k(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t batch, int multiprocessors);

// How the tensor-core kernel runs an M x N x K product (one batch entry) whose operands have these
// element strides and start these many elements (2 bytes each) past a 16-byte aligned address; nothing
// runs. For tests and reports: which loader each operand takes ("cp.async", "realigned" 16-byte vectors
// or "elements"), along which dim it is stored contiguous, whether B is first copied to an aligned
// buffer, and the epilogue's stores ("16-byte", or "16-byte realigned": rows not 16-byte aligned, the
// blocks at the row ends element by element).
struct TensorCoreVariant {
  std::string a_load, b_load, epilogue;
  bool a_k_contiguous = false, b_k_contiguous = false, b_staged = false;
};
TensorCoreVariant tensor_core_variant(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t a_stride_m,
                                      std::int64_t a_stride_k, std::int64_t b_stride_k, std::int64_t b_stride_n,
                                      std::int64_t a_offset, std::int64_t b_offset);

// Which hand-written kernels `matmul` uses on `device` (e.g. for adcuda.info()).
std::string gemm_path(int device);

// The kernel the last fp16/bf16 `matmul` of this process ran (benchmarks report it, tests check the
// dispatch): "none" before any, "cublaslt", "sm90_wgmma", "sm80_mma_sync" or "simt".
enum class HalfGemmKernel : int { kNone = 0, kCublasLt, kSm90Wgmma, kSm80MmaSync, kSimt };
std::string gemm_last_half_kernel();

// ---- cuBLASLt, loaded at run time (gemm_cublaslt.cu) -------------------------------------------
struct CublasLtStatus {
  bool loaded = false;
  std::string path;     // the library loaded
  std::string version;  // e.g. "13.1.0"
  std::string error;    // why nothing was loaded (every candidate's reason)
};

// Tries `candidates` (paths, or bare sonames for the dynamic loader's search) in order until one
// loads and has every function this module calls; the first success stays loaded for the process.
// Later calls return the loaded library's status without loading anything.
CublasLtStatus cublaslt_load(const std::vector<std::string>& candidates);
CublasLtStatus cublaslt_status();

}  // namespace adcuda
