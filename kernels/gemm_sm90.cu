// The Hopper GEMM (fp16 / bf16 in, fp32 accumulation; compute capability 9.0 with sm_90a code): TMA
// loads, wgmma (warpgroup MMA) from shared memory, mbarrier-synchronised producer/consumer stages and a
// persistent tile scheduler. gemm.cu chooses it (sm90_gemm_runs_on, sm90_gemm_accepts) and falls back
// to the mma.sync kernel (gemm_tensor_core.cu) everywhere else.
//
// Block tile 128 x 256 x 64, three warpgroups:
//   - warpgroup 0, the producer: gives registers away (setmaxnreg.dec 40); one thread issues, per
//     k-tile, a TMA box of A (128 rows x 64 K) and one of B (256 rows x 64 K) into a 4-stage ring, after
//     waiting for the stage's `empty` mbarrier, announcing the bytes on its `full` mbarrier
//     (arrive.expect_tx), which the copies complete;
//   - warpgroups 1 and 2, the consumers (setmaxnreg.inc 232): each owns 128 x 128 outputs (two
//     wgmma.m64n128k16 per k16 step, 128 fp32 accumulators a thread); it waits for a stage's `full`
//     barrier, issues its 8 wgmma as one group, and releases the stage of the previous k-tile once
//     wgmma.wait_group 1 says those products are done (one group in flight behind the loads).
// Both operands are K-major in shared memory in the 128-byte swizzle (TMA writes it, wgmma's
// descriptors read it): A is row-major M x K, B is read as N x K (a K x N B with K contiguous, e.g. a
// transposed weight; gemm.cu copies any other B into that form first). TMA zero-fills boxes past M, N
// and K, so every shape works; the epilogue stores predicated, straight from the accumulators
// (bias, activation, pre-activation copy as in the mma.sync kernel), or fp32 partial sums for split-K,
// which gemm.cu's reduction adds. Work units (output tile, K split) are walked by every block in
// steps of the grid (one block per SM), tile rows rasterised in groups of 8 as the mma.sync kernel does;
// the stage ring and its phases carry over from one unit to the next.
//
// The kernels have a body only where sm_90a features are compiled (__CUDA_ARCH_FEAT_SM90_ALL, a
// `90a` entry in the architecture list) or under the emulator; sm90_gemm_runs_on answers from the
// build's architecture list and the device's compute capability, once per device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "adcuda/build_config.h"
#include "gemm_args.cuh"
#include "launch_utils.cuh"
#include "ptx_sm90.cuh"
#include "runtime/errors.h"

namespace adcuda {
namespace {

namespace sm90 = ptx::sm90;

constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
constexpr int kBlockK = 64;  // 128 bytes of 16-bit elements: one swizzle row
constexpr int kConsumers = 2;
constexpr int kConsumerN = kBlockN / kConsumers;
constexpr int kStages = 4;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kABytes = kBlockM * kBlockK * 2;
constexpr int kBBytes = kBlockN * kBlockK * 2;
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kBarrierBytes = 2 * kStages * 8;
constexpr int kSharedBytes = 1024 + kStages * kStageBytes + kBarrierBytes;  // + alignment slack
constexpr int kRasterGroup = 8;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
static_assert(128 * kProducerRegisters + 128 * kConsumers * kConsumerRegisters <= 65536,
              "the register budgets must fit the SM's register file");
static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "stages must keep the swizzle's 1024-byte alignment");

// Work unit -> (output tile, K split).
struct Sm90Schedule {
  int tiles_m, tiles_n;
  int splits;
  int k_tiles;            // kBlockK tiles of the whole K
  int k_tiles_per_split;  // kBlockK tiles
  __host__ __device__ std::int64_t units() const { return static_cast<std::int64_t>(tiles_m) * tiles_n * splits; }
  __device__ __forceinline__ void unit(std::int64_t w, int& tile_m, int& tile_n, int& part) const {
    part = static_cast<int>(w % splits);
    const int linear = static_cast<int>(w / splits);
    const int per_group = kRasterGroup * tiles_n;
    const int group = linear / per_group;
    const int first_m = group * kRasterGroup;
    const int rows = tiles_m - first_m < kRasterGroup ? tiles_m - first_m : kRasterGroup;
    const int within = linear - group * per_group;
    tile_m = first_m + within % rows;
    tile_n = within / rows;
  }
  __device__ __forceinline__ int part_k_tiles(int part) const {
    const int left = k_tiles - part * k_tiles_per_split;
    return left < k_tiles_per_split ? left : k_tiles_per_split;
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    sm90_gemm_kernel(const __grid_constant__ sm90::TensorMap a_map, const __grid_constant__ sm90::TensorMap b_map,
                     GemmArgs args, SplitK split, Sm90Schedule schedule) {
#if defined(ADCUDA_SM90A_PTX) || defined(ADCUDA_EMULATION)
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  // The swizzle is a function of shared addresses: the stages start on a 1024-byte boundary of them.
  unsigned char* const shared = shared_raw + (1024 - sm90::shared_address(shared_raw) % 1024) % 1024;
  auto* const full = reinterpret_cast<std::uint64_t*>(shared + kStages * kStageBytes);
  std::uint64_t* const empty = full + kStages;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);                   // the producer's arrive.expect_tx
      sm90::mbarrier_init(&empty[s], kConsumers * 128);  // every consumer thread
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  const std::int64_t units = schedule.units();
  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x != 0) return;
    int stage = 0;
    unsigned phase = 0;
    for (std::int64_t w = blockIdx.x; w < units; w += gridDim.x) {
      int tile_m, tile_n, part;
      schedule.unit(w, tile_m, tile_n, part);
      const int k_tiles = schedule.part_k_tiles(part);
      const int k_tile_begin = part * schedule.k_tiles_per_split;
      for (int kt = 0; kt < k_tiles; ++kt) {
        // The stage's previous contents (phase - 1) must have been released by both consumers.
        sm90::mbarrier_wait_parity(&empty[stage], phase ^ 1u);
        sm90::mbarrier_arrive_expect_tx(&full[stage], kStageBytes);
        unsigned char* const a_stage = shared + stage * kStageBytes;
        const int k0 = (k_tile_begin + kt) * kBlockK;
        sm90::tma_load_2d(a_stage, &a_map, &full[stage], k0, tile_m * kBlockM);
        sm90::tma_load_2d(a_stage + kABytes, &b_map, &full[stage], k0, tile_n * kBlockN);
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
    return;
  }

  sm90::setmaxnreg_inc<kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int thread = threadIdx.x % 128;
  // Accumulator i of half h: row 64 h + 16 (thread / 32) + (thread % 32) / 4 + 8 ((i % 4) / 2), column
  // 8 (i / 4) + 2 (thread % 4) + i % 2 of the consumer's 128 x 128 tile (wgmma's m64nNk16 D fragment).
  const int row_in_half = 16 * (thread / 32) + (thread % 32) / 4;
  const int column_in_tile = 2 * (thread % 4);
  const std::uint32_t shared_base = sm90::shared_address(shared);
  const std::int64_t M = args.M, N = args.N;
  int stage = 0;
  unsigned phase = 0;
  for (std::int64_t w = blockIdx.x; w < units; w += gridDim.x) {
    int tile_m, tile_n, part;
    schedule.unit(w, tile_m, tile_n, part);
    const int k_tiles = schedule.part_k_tiles(part);
    float acc[2][64];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[h][i] = 0.0f;
    }
    int previous_stage = 0;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
      sm90::mbarrier_wait_parity(&full[stage], phase);
      // The accumulators were last written by plain instructions (zeroing) or by earlier wgmma: order
      // them before this group's wgmma.
      sm90::wgmma_fence();
      const std::uint32_t a_stage = shared_base + stage * kStageBytes;
      const std::uint32_t b_stage = a_stage + kABytes + consumer * kConsumerN * 128;
#pragma unroll
      for (int ks = 0; ks < kBlockK / 16; ++ks) {
        const std::uint64_t b_desc = sm90::kmajor_sw128_descriptor(b_stage + ks * 32);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const std::uint64_t a_desc = sm90::kmajor_sw128_descriptor(a_stage + h * 64 * 128 + ks * 32);
          sm90::wgmma_m64n128k16<T>(acc[h], a_desc, b_desc, true);
        }
      }
      sm90::wgmma_commit_group();
      // The previous k-tile's group has finished reading its stage: hand that stage back.
      sm90::wgmma_wait_group<1>();
      if (kt > 0) sm90::mbarrier_arrive(&empty[previous_stage]);
      previous_stage = stage;
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1u;
      }
    }
    sm90::wgmma_wait_group<0>();
    if (k_tiles > 0) sm90::mbarrier_arrive(&empty[previous_stage]);

    const std::int64_t m0 = static_cast<std::int64_t>(tile_m) * kBlockM;
    const std::int64_t n0 = static_cast<std::int64_t>(tile_n) * kBlockN + consumer * kConsumerN;
    if (split.splits > 1) {
      float* const partial = split.partial + static_cast<std::int64_t>(part) * M * split.partial_stride;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          const std::int64_t m = m0 + 64 * h + row_in_half + 8 * ((i % 4) / 2);
          const std::int64_t n = n0 + 8 * (i / 4) + column_in_tile + i % 2;
          if (m < M && n < N) partial[m * split.partial_stride + n] = acc[h][i];
        }
      }
    } else {
      T* const c = static_cast<T*>(args.c);
      T* const pre = static_cast<T*>(args.preactivation);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          const std::int64_t m = m0 + 64 * h + row_in_half + 8 * ((i % 4) / 2);
          const std::int64_t n = n0 + 8 * (i / 4) + column_in_tile + i % 2;
          if (m < M && n < N) {
            const float value = acc[h][i] + bias_at<T>(args, n);
            c[m * N + n] = convert<T>(apply_activation(args.activation, value));
            if (pre != nullptr) pre[m * N + n] = convert<T>(value);
          }
        }
      }
    }
  }
#else
  // No sm_90a code for this device: sm90_gemm_runs_on answers false and gemm.cu never launches this.
  __trap();
#endif
}

std::int64_t tma_row_stride(std::int64_t rows, std::int64_t K, std::int64_t row_stride) {
  // A single row's stride is never used; any multiple of 16 bytes covering the row describes it.
  return rows == 1 ? (K + 7) / 8 * 8 : row_stride;
}

// Whether the build's architecture list has sm_90a code (a "90a" entry; the emulated build lists it).
bool build_has_sm90a() {
  const std::string list = ADCUDA_CUDA_ARCHITECTURES;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = list.find(';', start);
    if (list.compare(start, 3, "90a") == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

sm90::TensorMap operand_map(const void* data, bool bf16, std::int64_t rows, std::int64_t K, std::int64_t row_stride,
                            int box_rows) {
  sm90::TensorMap map{};
  const int status = sm90::encode_tensor_map_2d(&map, data, bf16, static_cast<std::uint64_t>(K),
                                                static_cast<std::uint64_t>(rows),
                                                static_cast<std::uint64_t>(tma_row_stride(rows, K, row_stride)) * 2,
                                                kBlockK, static_cast<std::uint32_t>(box_rows));
  if (status != 0) {
    throw std::runtime_error("matmul: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(status) +
                             ") for a " + std::to_string(rows) + " x " + std::to_string(K) + " operand");
  }
  return map;
}

}  // namespace

Sm90Tiles sm90_gemm_tiles() { return {kBlockM, kBlockN, kBlockK}; }

bool sm90_operand_readable(std::int64_t rows, std::int64_t K, std::int64_t row_stride, std::int64_t k_stride,
                           const void* data) {
  return (K == 1 || k_stride == 1) && (rows == 1 || (row_stride % 8 == 0 && row_stride > 0)) &&
         reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && K < (std::int64_t(1) << 32) &&
         rows < (std::int64_t(1) << 32);
}

bool sm90_gemm_accepts(const GemmArgs& args) {
  return args.batch == 1 && args.K >= 1 &&
         sm90_operand_readable(args.M, args.K, args.a_stride_m, args.a_stride_k, args.a) &&
         sm90_operand_readable(args.N, args.K, args.b_stride_n, args.b_stride_k, args.b);
}

bool sm90_gemm_runs_on(int device) {
  static std::mutex mutex;
  static std::map<int, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(device);
  if (found != known.end()) return found->second;
  const DeviceFacts facts = device_facts(device);
  bool runs = false;
  if (facts.major == 9 && facts.minor == 0 && build_has_sm90a()) {
    // The driver loads the sm_90a image on a 9.0 device (machine code for the device itself is
    // preferred over PTX); asking for the kernel's attributes confirms there is an image at all. No
    // launch or copy: the first product may be inside a CUDA graph capture.
    int previous = 0;
    ADCUDA_CHECK(cudaGetDevice(&previous));
    ADCUDA_CHECK(cudaSetDevice(device));
    cudaFuncAttributes attributes{};
    runs = cudaFuncGetAttributes(&attributes, sm90_gemm_kernel<__half>) == cudaSuccess;
    (void)cudaGetLastError();  // a missing image is an answer here, not an error for the next call
    ADCUDA_CHECK(cudaSetDevice(previous));
  }
  return known[device] = runs;
}

template <typename T>
void launch_sm90_gemm(const GemmArgs& args, const SplitK& split, int device, cudaStream_t stream) {
  if (!sm90_gemm_accepts(args)) throw std::logic_error("matmul: the sm_90a GEMM was given operands TMA cannot read");
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  const sm90::TensorMap a_map = operand_map(args.a, bf16, args.M, args.K, args.a_stride_m, kBlockM);
  const sm90::TensorMap b_map = operand_map(args.b, bf16, args.N, args.K, args.b_stride_n, kBlockN);
  Sm90Schedule schedule{};
  schedule.tiles_m = static_cast<int>((args.M + kBlockM - 1) / kBlockM);
  schedule.tiles_n = static_cast<int>((args.N + kBlockN - 1) / kBlockN);
  schedule.k_tiles = static_cast<int>((args.K + kBlockK - 1) / kBlockK);
  // gemm.cu's splits count 32-wide K tiles, an even number of them per split: halve it.
  schedule.splits = split.splits;
  schedule.k_tiles_per_split = split.splits > 1 ? split.k_tiles_per_split / 2 : schedule.k_tiles;
  if (split.splits > 1 && split.k_tiles_per_split % 2 != 0) {
    throw std::logic_error("matmul: the sm_90a GEMM needs an even number of 32-wide K tiles per split");
  }
  const DeviceFacts facts = device_facts(device);
  auto kernel = sm90_gemm_kernel<T>;
  allow_shared_bytes(kernel, kSharedBytes, device);
  const std::int64_t units = schedule.units();
  const unsigned blocks = static_cast<unsigned>(units < facts.multiprocessors ? units : facts.multiprocessors);
  kernel<<<blocks, kThreads, kSharedBytes, stream>>>(a_map, b_map, args, split, schedule);
}

template void launch_sm90_gemm<__half>(const GemmArgs&, const SplitK&, int, cudaStream_t);
template void launch_sm90_gemm<__nv_bfloat16>(const GemmArgs&, const SplitK&, int, cudaStream_t);

}  // namespace adcuda
