// The sm_90a PTX instructions kernels/gemm_sm90.cu uses, as pure functions of their operands and of
// shared memory: mbarrier (init, arrive, expect_tx, complete_tx, test/try_wait.parity), the 2-d tiled
// TMA load (cp.async.bulk.tensor.2d ... .mbarrier::complete_tx::bytes) over a tensor map, the
// shared-memory swizzles, wgmma's shared-memory matrix descriptors and wgmma.mma_async
// .m64nNk16.f32.{f16,bf16}. No dependency on the emulator core, so that a plain C++ test checks them
// (tests/emulator/test_ptx_sm90.cpp); ptx_sm90.h wires them to the emulated threads.
//
// Written from the PTX ISA (sections "Parallel Synchronization and Communication Instructions:
// mbarrier", "Data Movement and Conversion Instructions: cp.async.bulk.tensor", "Tensor Maps",
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" with its "Matrix Descriptor
// Format", "Shared Memory Matrix Layout" and "Register Fragments" for m64nNk16) and the CUDA driver
// API's cuTensorMapEncodeTiled documentation, not from gemm_sm90.cu.
//
// Shared addresses here are byte offsets into the block's shared window (what __cvta_generic_to_shared
// gives on a GPU); the emulator makes them offsets into the launch's dynamic shared memory, so the
// swizzle, which the hardware applies to address bits, sees the same bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "emulator/ptx_sm80_semantics.h"

namespace adcuda::emu {

// ------------------------------------------------------------------------------------------------
// Swizzles. A W-byte swizzle (W = 32, 64 or 128) permutes the 16-byte chunks of each W-byte row of a
// (W/16 rows x W bytes) pattern: address bits [4, 4 + b) are XORed with bits [7, 7 + b), b = log2(W/16).
// The pattern repeats every 8 x 128 = 1024 bytes for 128B (hence TMA's and wgmma's 1024-byte
// alignment of swizzled tiles).

inline int swizzle_bits(int swizzle_bytes) {
  switch (swizzle_bytes) {
    case 0: return 0;
    case 32: return 1;
    case 64: return 2;
    case 128: return 3;
    default: throw std::invalid_argument("swizzle: " + std::to_string(swizzle_bytes) + " is not 0, 32, 64 or 128 bytes");
  }
}

inline std::uint32_t swizzle_address(std::uint32_t address, int swizzle_bytes) {
  const int bits = swizzle_bits(swizzle_bytes);
  if (bits == 0) return address;
  const std::uint32_t mask = ((1u << bits) - 1u) << 4;
  return address ^ ((address >> 3) & mask);
}

// ------------------------------------------------------------------------------------------------
// mbarrier: a 64-bit object in shared memory holding the current phase's parity, the arrivals still
// expected in it, the count each phase starts with, and the transaction count (bytes announced by
// expect_tx minus bytes completed by asynchronous copies; it may go negative when a copy completes
// before its expect_tx). A phase completes when its pending arrivals and its transaction count are
// both zero: the parity flips and the arrivals are re-armed. The packing is the emulator's own (the
// hardware's is opaque): pending [0, 20), expected [20, 40), phase [40], tx [41, 64) signed.

struct MbarrierState {
  std::uint32_t pending;
  std::uint32_t expected;
  std::uint32_t phase;  // parity of the current (incomplete) phase
  std::int32_t tx;
};

constexpr std::uint32_t kMbarrierMaxCount = (1u << 20) - 1;
constexpr std::int32_t kMbarrierMaxTx = (1 << 20) - 1;

inline MbarrierState mbarrier_unpack(std::uint64_t word) {
  MbarrierState s;
  s.pending = static_cast<std::uint32_t>(word & 0xfffffu);
  s.expected = static_cast<std::uint32_t>((word >> 20) & 0xfffffu);
  s.phase = static_cast<std::uint32_t>((word >> 40) & 1u);
  s.tx = static_cast<std::int32_t>(static_cast<std::int64_t>(word) >> 41);
  return s;
}

inline std::uint64_t mbarrier_pack(const MbarrierState& s) {
  return static_cast<std::uint64_t>(s.pending) | (static_cast<std::uint64_t>(s.expected) << 20) |
         (static_cast<std::uint64_t>(s.phase) << 40) | (static_cast<std::uint64_t>(static_cast<std::int64_t>(s.tx)) << 41);
}

// mbarrier.init.shared::cta.b64 [bar], count
inline void mbarrier_init(std::uint64_t& word, std::uint32_t count) {
  if (count < 1 || count > kMbarrierMaxCount) {
    throw std::invalid_argument("mbarrier.init: count " + std::to_string(count) + " is outside 1..2^20-1");
  }
  word = mbarrier_pack({count, count, 0, 0});
}

inline void mbarrier_complete_if_done(MbarrierState& s) {
  if (s.pending == 0 && s.tx == 0) {
    s.phase ^= 1u;
    s.pending = s.expected;
  }
}

// mbarrier.expect_tx: the current phase waits for `bytes` more transaction bytes.
inline void mbarrier_expect_tx(std::uint64_t& word, std::uint32_t bytes) {
  MbarrierState s = mbarrier_unpack(word);
  if (static_cast<std::int64_t>(s.tx) + bytes > kMbarrierMaxTx) {
    throw std::invalid_argument("mbarrier.expect_tx: the transaction count exceeds 2^20-1 bytes");
  }
  s.tx += static_cast<std::int32_t>(bytes);
  word = mbarrier_pack(s);
}

// mbarrier.complete_tx (what an asynchronous copy does when its bytes have landed).
inline void mbarrier_complete_tx(std::uint64_t& word, std::uint32_t bytes) {
  MbarrierState s = mbarrier_unpack(word);
  if (static_cast<std::int64_t>(s.tx) - bytes < -kMbarrierMaxTx) {
    throw std::invalid_argument("mbarrier.complete_tx: the transaction count falls below -(2^20-1) bytes");
  }
  s.tx -= static_cast<std::int32_t>(bytes);
  mbarrier_complete_if_done(s);
  word = mbarrier_pack(s);
}

// mbarrier.arrive{.expect_tx}.shared::cta.b64 state, [bar]{, tx}: returns the state token (here the
// parity of the phase arrived on).
inline std::uint64_t mbarrier_arrive(std::uint64_t& word, std::uint32_t count = 1, std::uint32_t expect_tx = 0) {
  if (expect_tx > 0) mbarrier_expect_tx(word, expect_tx);
  MbarrierState s = mbarrier_unpack(word);
  if (count < 1 || count > s.pending) {
    throw std::invalid_argument("mbarrier.arrive: " + std::to_string(count) + " arrivals on a phase expecting only " +
                                std::to_string(s.pending) + " more");
  }
  const std::uint64_t token = s.phase;
  s.pending -= count;
  mbarrier_complete_if_done(s);
  word = mbarrier_pack(s);
  return token;
}

// mbarrier.test_wait.parity / try_wait.parity [bar], parity: true once the phase with that parity
// has completed, i.e. the current phase has the other parity (the operand names the current phase
// or the one just before it).
inline bool mbarrier_test_wait_parity(std::uint64_t word, std::uint32_t parity) {
  return mbarrier_unpack(word).phase != (parity & 1u);
}

// ------------------------------------------------------------------------------------------------
// Tensor maps and the 2-d tiled TMA load. The emulator's encoding of a CUtensorMap (the real one, from
// cuTensorMapEncodeTiled, is opaque): a 2-d row-major tensor of `dims[0]` (innermost) x `dims[1]`
// elements of `element_bytes`, rows `row_stride_bytes` apart, read in boxes of box[0] x box[1]
// elements. In shared memory a box is box[1] rows of box[0] * element_bytes bytes, one after another,
// with the swizzle applied to each 16-byte chunk's address; with a swizzle the row must be exactly the
// swizzle's width (the layouts wgmma's descriptors name). Elements of the box outside the tensor
// (either side, either dimension) are written as zeros, and the whole box's bytes count as the copy's
// transaction bytes.

constexpr std::uint64_t kTensorMapMagic = 0x616463756461544dull;  // "adcudaTM"

struct alignas(64) TensorMap2d {
  std::uint64_t magic;
  const void* global;
  std::uint64_t dims[2];
  std::uint64_t row_stride_bytes;
  std::uint32_t box[2];
  std::uint32_t element_bytes;
  std::uint32_t swizzle_bytes;
  unsigned char unused[128 - 56];
};
static_assert(sizeof(TensorMap2d) == 128, "a tensor map is 128 bytes, as CUtensorMap is");

// The checks cuTensorMapEncodeTiled makes of the arguments this encoding takes.
inline TensorMap2d encode_tensor_map_2d(const void* global, std::uint32_t element_bytes, std::uint64_t dim0,
                                        std::uint64_t dim1, std::uint64_t row_stride_bytes, std::uint32_t box0,
                                        std::uint32_t box1, int swizzle_bytes) {
  const int bits = swizzle_bits(swizzle_bytes);
  auto fail = [](const std::string& what) { throw std::invalid_argument("tensor map: " + what); };
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8) fail("bad element size");
  if (reinterpret_cast<std::uintptr_t>(global) % 16 != 0) fail("the global address must be 16-byte aligned");
  if (dim0 < 1 || dim1 < 1 || dim0 > (1ull << 32) || dim1 > (1ull << 32)) fail("dims must be 1..2^32");
  if (row_stride_bytes % 16 != 0 || row_stride_bytes >= (1ull << 40)) fail("the row stride must be a multiple of 16 below 2^40");
  if (box0 < 1 || box1 < 1 || box0 > 256 || box1 > 256) fail("box dims must be 1..256");
  if ((box0 * element_bytes) % 16 != 0) fail("the box's inner dimension must be a multiple of 16 bytes");
  if (bits > 0 && box0 * element_bytes != static_cast<std::uint32_t>(swizzle_bytes)) {
    fail("with a swizzle the box's inner dimension must span the swizzle's width");
  }
  TensorMap2d map{};
  map.magic = kTensorMapMagic;
  map.global = global;
  map.dims[0] = dim0;
  map.dims[1] = dim1;
  map.row_stride_bytes = row_stride_bytes;
  map.box[0] = box0;
  map.box[1] = box1;
  map.element_bytes = element_bytes;
  map.swizzle_bytes = static_cast<std::uint32_t>(swizzle_bytes);
  return map;
}

inline std::uint32_t tensor_map_box_bytes(const TensorMap2d& map) { return map.box[0] * map.box[1] * map.element_bytes; }

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [map, {c0, c1}],
// [bar]: writes the box whose first element is (c0, c1) to shared address `dst` of `shared` (the
// window's base); returns the transaction bytes it completes on the barrier.
inline std::uint32_t tma_load_2d(const TensorMap2d& map, unsigned char* shared, std::uint32_t dst, std::int32_t c0,
                                 std::int32_t c1) {
  if (map.magic != kTensorMapMagic) throw std::invalid_argument("cp.async.bulk.tensor: not a tensor map");
  const std::uint32_t alignment = map.swizzle_bytes == 128 ? 1024 : 128;
  if (dst % alignment != 0) {
    throw std::invalid_argument("cp.async.bulk.tensor: the shared destination " + std::to_string(dst) +
                                " is not " + std::to_string(alignment) + "-byte aligned");
  }
  const std::uint32_t row_bytes = map.box[0] * map.element_bytes;
  const auto* global = static_cast<const unsigned char*>(map.global);
  for (std::uint32_t r = 0; r < map.box[1]; ++r) {
    const std::int64_t y = static_cast<std::int64_t>(c1) + r;
    const bool row_inside = y >= 0 && static_cast<std::uint64_t>(y) < map.dims[1];
    for (std::uint32_t e = 0; e < map.box[0]; ++e) {
      const std::int64_t x = static_cast<std::int64_t>(c0) + e;
      const std::uint32_t linear = dst + r * row_bytes + e * map.element_bytes;
      unsigned char* out = shared + swizzle_address(linear, static_cast<int>(map.swizzle_bytes));
      if (row_inside && x >= 0 && static_cast<std::uint64_t>(x) < map.dims[0]) {
        std::memcpy(out, global + static_cast<std::uint64_t>(y) * map.row_stride_bytes +
                             static_cast<std::uint64_t>(x) * map.element_bytes,
                    map.element_bytes);
      } else {
        std::memset(out, 0, map.element_bytes);
      }
    }
  }
  return tensor_map_box_bytes(map);
}

// ------------------------------------------------------------------------------------------------
// wgmma's shared-memory matrix descriptor (64 bits): start address >> 4 in bits [0, 14), leading
// dimension byte offset >> 4 in [16, 30), stride dimension byte offset >> 4 in [32, 46), base offset
// in [49, 52), swizzle mode in [62, 64) (0 none, 1 128B, 2 64B, 3 32B).

struct SmemDescriptor {
  std::uint32_t start;           // bytes
  std::uint32_t leading_bytes;   // LBO
  std::uint32_t stride_bytes;    // SBO
  std::uint32_t base_offset;
  int swizzle_bytes;
};

inline std::uint64_t encode_smem_descriptor(const SmemDescriptor& d) {
  std::uint64_t mode = 0;
  switch (d.swizzle_bytes) {
    case 0: mode = 0; break;
    case 128: mode = 1; break;
    case 64: mode = 2; break;
    case 32: mode = 3; break;
    default: throw std::invalid_argument("wgmma descriptor: bad swizzle");
  }
  return (static_cast<std::uint64_t>((d.start >> 4) & 0x3fffu)) |
         (static_cast<std::uint64_t>((d.leading_bytes >> 4) & 0x3fffu) << 16) |
         (static_cast<std::uint64_t>((d.stride_bytes >> 4) & 0x3fffu) << 32) |
         (static_cast<std::uint64_t>(d.base_offset & 0x7u) << 49) | (mode << 62);
}

inline SmemDescriptor decode_smem_descriptor(std::uint64_t bits) {
  static constexpr int kModes[4] = {0, 128, 64, 32};
  SmemDescriptor d;
  d.start = static_cast<std::uint32_t>(bits & 0x3fffu) << 4;
  d.leading_bytes = static_cast<std::uint32_t>((bits >> 16) & 0x3fffu) << 4;
  d.stride_bytes = static_cast<std::uint32_t>((bits >> 32) & 0x3fffu) << 4;
  d.base_offset = static_cast<std::uint32_t>((bits >> 49) & 0x7u);
  d.swizzle_bytes = kModes[(bits >> 62) & 0x3u];
  return d;
}

// The shared address of element (row, k) of a K-major operand (A: row = m; B: row = n) of 2-byte
// elements. Core matrices are 8 rows; rows of one core matrix are `swizzle width` bytes apart (16
// without a swizzle), groups of 8 rows SBO apart; without a swizzle each 16-byte (8-element) K chunk is
// a further core matrix LBO apart. The swizzle then permutes the address's 16-byte chunks, the same
// function TMA applied when it wrote the tile, so a descriptor whose start moves by 32 bytes per
// k16 step inside a 128-byte row reads the next K slice.
inline std::uint32_t kmajor_element_address(const SmemDescriptor& d, int row, int k) {
  if (d.base_offset != 0) throw std::invalid_argument("wgmma descriptor: only base offset 0 is emulated");
  const std::uint32_t byte_k = static_cast<std::uint32_t>(k) * 2;
  std::uint32_t address;
  if (d.swizzle_bytes == 0) {
    address = d.start + static_cast<std::uint32_t>(row / 8) * d.stride_bytes + (byte_k / 16) * d.leading_bytes +
              static_cast<std::uint32_t>(row % 8) * 16 + byte_k % 16;
  } else {
    address = d.start + static_cast<std::uint32_t>(row / 8) * d.stride_bytes +
              static_cast<std::uint32_t>(row % 8) * static_cast<std::uint32_t>(d.swizzle_bytes) + byte_k;
  }
  return swizzle_address(address, d.swizzle_bytes);
}

// The accumulator fragment of wgmma .m64nNk16 with fp32 D: thread t of the warpgroup (warp w = t / 32,
// lane l) holds N / 2 floats; element i belongs to n8 tile i / 4 and within it is laid out as
// mma.m16n8's C fragment, in rows 16 w .. 16 w + 15.
inline FragmentCoord wgmma_d_coord(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  const FragmentCoord c = mma_c_coord(lane, i % 4);
  return {16 * warp + c.row, 8 * (i / 4) + c.col};
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} d, a-desc, b-desc, scale-d, 1, 1, 0, 0
// (A and B K-major from shared memory, no negation, no transpose), for thread `thread` (0..127) of
// the warpgroup: d (N / 2 floats) = A (64 x 16) * B (16 x N) + (scale_d ? d : 0), products summed in
// fp32 in ascending k after the old value.
inline void wgmma_m64nNk16_thread(MmaInputType type, int n, std::uint64_t a_desc, std::uint64_t b_desc, bool scale_d,
                                  const unsigned char* shared, int thread, float* d) {
  if (n < 8 || n > 256 || n % 8 != 0) throw std::invalid_argument("wgmma: N must be a multiple of 8 in 8..256");
  if (thread < 0 || thread >= 128) throw std::invalid_argument("wgmma: a warpgroup has 128 threads");
  const SmemDescriptor a = decode_smem_descriptor(a_desc);
  const SmemDescriptor b = decode_smem_descriptor(b_desc);
  auto element = [&](const SmemDescriptor& desc, int row, int k) {
    std::uint16_t bits;
    std::memcpy(&bits, shared + kmajor_element_address(desc, row, k), sizeof bits);
    return input_to_float(type, bits);
  };
  const int first_row = wgmma_d_coord(thread, 0).row;
  float a_rows[2][16];
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 16; ++k) a_rows[h][k] = element(a, first_row + 8 * h, k);
  }
  for (int tile = 0; tile < n / 8; ++tile) {
    float b_cols[2][16];
    const int first_col = wgmma_d_coord(thread, 4 * tile).col;
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < 16; ++k) b_cols[c][k] = element(b, first_col + c, k);
    }
    for (int r = 0; r < 4; ++r) {
      const int i = 4 * tile + r;
      const float* a_row = a_rows[r / 2];
      const float* b_col = b_cols[r % 2];
      float sum = scale_d ? d[i] : 0.0f;
      for (int k = 0; k < 16; ++k) sum += a_row[k] * b_col[k];
      d[i] = sum;
    }
  }
}

}  // namespace adcuda::emu
