// Standalone check of kernels/emulator/ptx_sm90_semantics.h: no emulator core, no GPU.
// Build: g++ -std=c++17 -I<cuda>/include -I kernels tests/emulator/test_ptx_sm90.cpp; exit status 0 = pass.
//
// Second sources for what the header computes: the 128B swizzle as "16-byte chunk c of row r lands in
// chunk c ^ (r % 8)" (the PTX ISA's swizzle figures, written per chunk rather than as address bits);
// the wgmma accumulator layout as CuTe's CLayout_64xN ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512))
// (cute/atom/mma_traits_sm90_gmma.hpp); products against a plain triple loop over the global matrices
// the tiles were loaded from.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "check.h"
#include "emulator/ptx_sm90_semantics.h"

namespace emu = adcuda::emu;

namespace {

using standalone_check::check;
using standalone_check::throws_invalid_argument;

std::uint16_t to_bits(emu::MmaInputType type, float x) {
  if (type == emu::MmaInputType::kF16) return __half_as_ushort(__float2half_rn(x));
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// ------------------------------------------------------------------------------------------------

void test_swizzle() {
  for (std::uint32_t base = 0; base < 4096; base += 1024) {
    std::vector<int> seen(1024, 0);
    for (std::uint32_t r = 0; r < 8; ++r) {
      for (std::uint32_t c = 0; c < 8; ++c) {
        for (std::uint32_t byte = 0; byte < 16; ++byte) {
          const std::uint32_t linear = base + r * 128 + c * 16 + byte;
          const std::uint32_t got = emu::swizzle_address(linear, 128);
          check(got == base + r * 128 + ((c ^ r) * 16) + byte, "128B swizzle: chunk c of row r -> chunk c ^ r", r, c);
          if (got >= base && got < base + 1024) ++seen[got - base];
        }
      }
    }
    for (int i = 0; i < 1024; ++i) check(seen[i] == 1, "128B swizzle permutes each 1024-byte pattern", i);
  }
  // 64B: rows of 64 bytes, chunk c (0..3) of row r (the address's bits 7-8 count pairs of rows).
  for (std::uint32_t r = 0; r < 8; ++r) {
    for (std::uint32_t c = 0; c < 4; ++c) {
      const std::uint32_t linear = r * 64 + c * 16;
      check(emu::swizzle_address(linear, 64) == r * 64 + ((c ^ ((r / 2) % 4)) * 16), "64B swizzle", r, c);
    }
  }
  check(emu::swizzle_address(12345, 0) == 12345, "no swizzle is the identity");
  check(throws_invalid_argument([] { emu::swizzle_address(0, 48); }), "a 48-byte swizzle is rejected");
}

void test_mbarrier_phases() {
  std::uint64_t bar = 0;
  emu::mbarrier_init(bar, 2);
  check(!emu::mbarrier_test_wait_parity(bar, 0), "phase 0 is not complete after init");
  check(emu::mbarrier_test_wait_parity(bar, 1), "the phase before phase 0 (parity 1) counts as complete");
  check(emu::mbarrier_arrive(bar) == 0, "the token names phase 0");
  check(!emu::mbarrier_test_wait_parity(bar, 0), "one of two arrivals does not complete the phase");
  emu::mbarrier_arrive(bar);
  check(emu::mbarrier_test_wait_parity(bar, 0), "two arrivals complete phase 0");
  check(!emu::mbarrier_test_wait_parity(bar, 1), "phase 1 has begun");
  check(emu::mbarrier_unpack(bar).pending == 2, "the arrivals are re-armed");

  // A transaction: the arrival alone does not complete the phase; the bytes do.
  std::uint64_t full = 0;
  emu::mbarrier_init(full, 1);
  emu::mbarrier_arrive(full, 1, 4096);
  check(!emu::mbarrier_test_wait_parity(full, 0), "arrive.expect_tx waits for its bytes");
  emu::mbarrier_complete_tx(full, 1024);
  check(!emu::mbarrier_test_wait_parity(full, 0), "part of the bytes is not enough");
  emu::mbarrier_complete_tx(full, 3072);
  check(emu::mbarrier_test_wait_parity(full, 0), "all the bytes complete the phase");
  // Bytes landing before their expect_tx: the count goes negative and the arrival settles it.
  emu::mbarrier_complete_tx(full, 512);
  check(emu::mbarrier_unpack(full).tx == -512, "complete_tx before expect_tx goes negative");
  check(!emu::mbarrier_test_wait_parity(full, 1), "phase 1 waits for its arrival");
  emu::mbarrier_arrive(full, 1, 512);
  check(emu::mbarrier_test_wait_parity(full, 1), "the late expect_tx balances and the arrival completes phase 1");
  check(emu::mbarrier_unpack(full).phase == 0, "two phases done: parity back to 0");

  // Many phases keep flipping.
  for (int p = 0; p < 10; ++p) {
    const std::uint32_t parity = emu::mbarrier_unpack(bar).phase;
    emu::mbarrier_arrive(bar, 2);
    check(emu::mbarrier_test_wait_parity(bar, parity), "arrive(count 2) completes the phase", p);
  }
  check(throws_invalid_argument([&] { emu::mbarrier_arrive(bar, 3); }), "more arrivals than pending is rejected");
  check(throws_invalid_argument([&] { emu::mbarrier_init(bar, 0); }), "count 0 is rejected");
}

// A global bf16 matrix rows x cols (row-major, padded row stride) loaded by TMA boxes, including boxes
// hanging over every edge.
void test_tma_load() {
  const int rows = 70, cols = 100, stride = 104;
  std::vector<std::uint16_t> global(static_cast<std::size_t>(rows) * stride);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < stride; ++c) global[r * stride + c] = static_cast<std::uint16_t>(1 + r * 1000 + c);
  alignas(1024) static unsigned char shared[4096 + 1024];
  const emu::TensorMap2d map = emu::encode_tensor_map_2d(global.data(), 2, cols, rows, stride * 2, 64, 16, 128);
  const int origins[][2] = {{0, 0}, {64, 60}, {-8, -3}, {40, 10}};
  for (const auto& origin : origins) {
    std::memset(shared, 0xab, sizeof shared);
    const std::uint32_t bytes = emu::tma_load_2d(map, shared, 1024, origin[0], origin[1]);
    check(bytes == 64 * 16 * 2, "a TMA load completes the whole box's bytes");
    for (int r = 0; r < 16; ++r) {
      for (int e = 0; e < 64; ++e) {
        const int y = origin[1] + r, x = origin[0] + e;
        const std::uint32_t chunk = static_cast<std::uint32_t>(e) / 8;
        const std::uint32_t at = 1024 + r * 128 + ((chunk ^ (r % 8)) * 16) + (e % 8) * 2;
        std::uint16_t got;
        std::memcpy(&got, shared + at, 2);
        const bool inside = y >= 0 && y < rows && x >= 0 && x < cols;
        const std::uint16_t want = inside ? global[y * stride + x] : 0;
        check(got == want, "TMA box element (swizzled; zeros outside the tensor)", r, e, origin[0]);
      }
    }
    for (int i = 0; i < 1024; ++i) check(shared[i] == 0xab, "nothing written before the destination", i);
    for (int i = 1024 + 2048; i < 4096; ++i) check(shared[i] == 0xab, "nothing written past the box", i);
  }
  check(throws_invalid_argument([&] { emu::tma_load_2d(map, shared, 512, 0, 0); }),
        "a 128B-swizzled box needs a 1024-byte aligned destination");
  check(throws_invalid_argument([&] { emu::encode_tensor_map_2d(global.data(), 2, cols, rows, 200, 64, 16, 128); }),
        "a row stride that is not a multiple of 16 bytes is rejected");
  check(throws_invalid_argument([&] { emu::encode_tensor_map_2d(global.data(), 2, cols, rows, 208, 32, 16, 128); }),
        "a 64-byte box row under the 128B swizzle is rejected");
}

// Descriptors round-trip through their bit fields.
void test_descriptor_bits() {
  const emu::SmemDescriptor d{0x3fff0, 16, 1024, 0, 128};
  const std::uint64_t bits = emu::encode_smem_descriptor(d);
  check((bits & 0x3fff) == 0x3fff && ((bits >> 16) & 0x3fff) == 1 && ((bits >> 32) & 0x3fff) == 64 && (bits >> 62) == 1,
        "descriptor fields at the PTX ISA's bit positions");
  const emu::SmemDescriptor back = emu::decode_smem_descriptor(bits);
  check(back.start == d.start && back.leading_bytes == 16 && back.stride_bytes == 1024 && back.swizzle_bytes == 128,
        "descriptor round trip");
  check(emu::decode_smem_descriptor(std::uint64_t(3) << 62).swizzle_bytes == 32, "mode 3 is the 32B swizzle");
}

// CuTe's CLayout_64xN against the header's wgmma_d_coord, and each element held once.
void test_wgmma_fragment_layout() {
  for (const int n : {8, 64, 128, 256}) {
    std::vector<int> seen(64 * n, 0);
    for (int t = 0; t < 128; ++t) {
      for (int v = 0; v < n / 2; ++v) {
        const int offset = 128 * (t % 4) + (t / 4) % 8 + 16 * (t / 32) + 64 * (v % 2) + 8 * ((v / 2) % 2) + 512 * (v / 4);
        const emu::FragmentCoord p = emu::wgmma_d_coord(t, v);
        check(p.row == offset % 64 && p.col == offset / 64, "wgmma D fragment vs CuTe CLayout_64xN", t, v, n);
        if (p.row >= 0 && p.row < 64 && p.col >= 0 && p.col < n) ++seen[p.row * n + p.col];
      }
    }
    for (int i = 0; i < 64 * n; ++i) check(seen[i] == 1, "each accumulator held by exactly one thread", i, n);
  }
}

// A (64 x K) and B (N x K, K-major) loaded by TMA into 128B-swizzled tiles, multiplied by wgmma k16
// steps whose descriptors move 32 bytes along the 128-byte rows: the product of the whole K = 64.
void test_wgmma_from_tma_tiles(emu::MmaInputType type, int n, std::mt19937& rng) {
  constexpr int kM = 64, kK = 64;
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<std::uint16_t> a(kM * kK), b(static_cast<std::size_t>(n) * kK);
  std::vector<float> af(a.size()), bf(b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = to_bits(type, uniform(rng));
    af[i] = emu::input_to_float(type, a[i]);
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    b[i] = to_bits(type, uniform(rng));
    bf[i] = emu::input_to_float(type, b[i]);
  }
  alignas(1024) static unsigned char shared[1024 + 64 * 128 + 256 * 128];
  std::memset(shared, 0xff, sizeof shared);
  const std::uint32_t a_at = 1024, b_at = a_at + kM * 128;
  emu::tma_load_2d(emu::encode_tensor_map_2d(a.data(), 2, kK, kM, kK * 2, 64, kM, 128), shared, a_at, 0, 0);
  emu::tma_load_2d(emu::encode_tensor_map_2d(b.data(), 2, kK, n, kK * 2, 64, n, 128), shared, b_at, 0, 0);
  std::vector<float> d(128 * (n / 2), 12345.0f);
  for (int ks = 0; ks < kK / 16; ++ks) {
    const std::uint64_t a_desc = emu::encode_smem_descriptor({a_at + 32u * ks, 16, 1024, 0, 128});
    const std::uint64_t b_desc = emu::encode_smem_descriptor({b_at + 32u * ks, 16, 1024, 0, 128});
    for (int t = 0; t < 128; ++t) emu::wgmma_m64nNk16_thread(type, n, a_desc, b_desc, ks > 0, shared, t, &d[t * (n / 2)]);
  }
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < n / 2; ++v) {
      const emu::FragmentCoord p = emu::wgmma_d_coord(t, v);
      double want = 0;
      for (int k = 0; k < kK; ++k) want += static_cast<double>(af[p.row * kK + k]) * bf[p.col * kK + k];
      check(std::fabs(d[t * (n / 2) + v] - want) <= 1e-4 * (1 + std::fabs(want)), "wgmma product vs triple loop", t, v, n);
    }
  }
}

// Without a swizzle: core matrices of 8 rows x 16 bytes, K chunks LBO apart and row groups SBO apart.
void test_wgmma_interleaved(std::mt19937& rng) {
  constexpr int kN = 16;
  const auto type = emu::MmaInputType::kBF16;
  alignas(1024) static unsigned char shared[8192];
  std::memset(shared, 0xff, sizeof shared);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float af[64][16], bf[kN][16];
  const std::uint32_t a_at = 0, b_at = 4096, lbo = 128, a_sbo = 256, b_sbo = 256;
  auto place = [&](std::uint32_t at, std::uint32_t sbo, int row, int k, float value) {
    const std::uint16_t bits = to_bits(type, value);
    const std::uint32_t address = at + (row / 8) * sbo + (k / 8) * lbo + (row % 8) * 16 + (k % 8) * 2;
    std::memcpy(shared + address, &bits, 2);
    return emu::input_to_float(type, bits);
  };
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < 16; ++k) af[r][k] = place(a_at, a_sbo, r, k, uniform(rng));
  for (int r = 0; r < kN; ++r)
    for (int k = 0; k < 16; ++k) bf[r][k] = place(b_at, b_sbo, r, k, uniform(rng));
  const std::uint64_t a_desc = emu::encode_smem_descriptor({a_at, lbo, a_sbo, 0, 0});
  const std::uint64_t b_desc = emu::encode_smem_descriptor({b_at, lbo, b_sbo, 0, 0});
  for (int t = 0; t < 128; ++t) {
    float d[kN / 2];
    for (float& x : d) x = 1.0f;
    emu::wgmma_m64nNk16_thread(type, kN, a_desc, b_desc, true, shared, t, d);
    for (int v = 0; v < kN / 2; ++v) {
      const emu::FragmentCoord p = emu::wgmma_d_coord(t, v);
      double want = 1.0;
      for (int k = 0; k < 16; ++k) want += static_cast<double>(af[p.row][k]) * bf[p.col][k];
      check(std::fabs(d[v] - want) <= 1e-5 * (1 + std::fabs(want)), "interleaved wgmma with scale-d", t, v);
    }
  }
  check(throws_invalid_argument([&] {
          float d[4];
          emu::wgmma_m64nNk16_thread(type, 12, a_desc, b_desc, true, shared, 0, d);
        }),
        "N = 12 is rejected");
}

}  // namespace

int main() {
  std::mt19937 rng(20261206);
  test_swizzle();
  test_mbarrier_phases();
  test_tma_load();
  test_descriptor_bits();
  test_wgmma_fragment_layout();
  for (const auto type : {emu::MmaInputType::kF16, emu::MmaInputType::kBF16}) {
    for (const int n : {8, 64, 256}) test_wgmma_from_tma_tiles(type, n, rng);
  }
  test_wgmma_interleaved(rng);
  return standalone_check::verdict("ptx_sm90 semantics");
}
