// Emulations of the sm_80 inline PTX in kernels/gemm.cu, for the ADCUDA_EMULATION build: each call is
// made by one emulated CUDA thread, like the instruction it stands for. The semantics live in
// ptx_sm80_semantics.h (pure functions over the 32 lanes' operands, tested on their own); this file
// hands them the warp through warp_collective and the thread's cp.async groups through async_copies.
#pragma once

#include <cstdint>

#include "emulator/grid.h"
#include "emulator/ptx_sm80_semantics.h"

namespace adcuda::emu {

constexpr unsigned kFullWarp = 0xffffffffu;

// cp.async.cg.shared.global [shared_dst], [global_src], 16, src_bytes: queued in the thread's open
// group; it copies (and zero-fills past src_bytes) only when a wait_group performs it.
inline void cp_async_16(void* shared_dst, const void* global_src, int src_bytes) {
  async_copies().open.push_back(make_async_copy_16<AsyncCopy>(shared_dst, global_src, src_bytes));
}

// cp.async.commit_group
inline void cp_async_commit() { commit_async_group(async_copies()); }

// cp.async.wait_group pending
inline void cp_async_wait(int pending) { wait_async_groups(async_copies(), pending); }

struct LdmatrixRegisters {
  std::uint32_t r[4];
};

// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 {r0, r1, r2, r3}, [row]: all 32 lanes take part.
inline void ldmatrix_x4(bool trans, std::uint32_t (&r)[4], const void* row) {
  check_ldmatrix_row(row, lane_id());
  const LdmatrixRegisters out = warp_collective<const void*, LdmatrixRegisters>(
      kFullWarp, row, [trans](const void* const (&rows)[kWarpSize], int lane) {
        LdmatrixRegisters regs;
        ldmatrix_x4_lane(rows, trans, lane, regs.r);
        return regs;
      },
      "ldmatrix");
  for (int i = 0; i < 4; ++i) r[i] = out.r[i];
}

struct MmaFragment {
  float d[4];
};

// mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32 {d}, {a}, {b0, b1}, {d}: all 32
// lanes take part; d holds C on entry and D on return.
inline void mma_m16n8k16(MmaInputType type, float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                         std::uint32_t b1) {
  MmaLaneInput in{};
  for (int i = 0; i < 4; ++i) {
    in.a[i] = a[i];
    in.c[i] = d[i];
  }
  in.b[0] = b0;
  in.b[1] = b1;
  const MmaFragment out = warp_collective<MmaLaneInput, MmaFragment>(
      kFullWarp, in, [type](const MmaLaneInput (&lanes)[kWarpSize], int lane) {
        MmaFragment fragment;
        mma_m16n8k16_lane(type, lanes, lane, fragment.d);
        return fragment;
      },
      "mma.sync");
  for (int i = 0; i < 4; ++i) d[i] = out.d[i];
}

}  // namespace adcuda::emu
