// Dropout on attention probabilities, drawn inside the attention kernels from the Philox stream
// (philox.cuh) and drawn again, identically, by the backward; the CPU backend's attention draws the
// same mask from the same counters (adcuda/backends/cpu/attention.py, _attention_dropout_keep), so the
// two backends agree exactly on which probabilities are dropped.
//
// Counter layout. The (batch, L, S) probability matrix is cut into 16 x 16 tiles (query tile i16, key
// tile j16; ceil(L/16) x ceil(S/16) per batch entry). Inside a tile, Philox block (a, c), a and c in
// 0..7, gives its four 32-bit words to the elements (query a, key c), (a, c + 8), (a + 8, c) and
// (a + 8, c + 8), in that order; the element is kept when its word is below `keep_threshold`. Block
// index = ((b * ceil(L/16) + i16) * ceil(S/16) + j16) * 64 + 8 a + c, counter = (block index, offset),
// key = seed (philox::draw_block). The 2 x 2 quad a block covers is what one thread holds of a 16 x 16
// tile both in the forward's S = Q K^T fragments (rows g, g + 8; columns 2t, 2t + 1, + 8) and in the
// backward's S^T = K Q^T fragments (rows = keys g, g + 8; columns = queries 2t, 2t + 1, + 8): each
// thread draws exactly the blocks it needs, two per 16 x 16 tile, in both passes.
#pragma once

#include <cstdint>

#include "philox.cuh"

namespace adcuda {

struct AttentionDropout {
  bool enabled;                  // dropout_p > 0
  std::uint32_t keep_threshold;  // keep when the word < this: round((1 - p) * 2^32), at most 2^32 - 1
  double scale;                  // 1 / (1 - p) (0 for p = 1), applied to what is kept
  std::uint64_t seed, offset;
  std::int64_t query_tiles, key_tiles;  // ceil(L / 16), ceil(S / 16)
};

// The four words of block (a, c) of tile (i16, j16) of batch entry b.
__host__ __device__ __forceinline__ philox::Words attention_dropout_block(const AttentionDropout& d, std::int64_t b,
                                                                          std::int64_t i16, std::int64_t j16, int a,
                                                                          int c) {
  const std::int64_t tile = (b * d.query_tiles + i16) * d.key_tiles + j16;
  const std::uint64_t block = static_cast<std::uint64_t>(tile * 64 + 8 * a + c);
  return philox::draw_block(d.seed, d.offset, block);
}

// Whether probability (i, j) of batch entry b is kept: one block for one element, for the CUDA-core
// kernels, which visit elements one at a time.
__host__ __device__ __forceinline__ bool attention_dropout_keeps(const AttentionDropout& d, std::int64_t b,
                                                                 std::int64_t i, std::int64_t j) {
  const philox::Words w =
      attention_dropout_block(d, b, i / 16, j / 16, static_cast<int>(i % 8), static_cast<int>(j % 8));
  const int word = 2 * static_cast<int>((i % 16) / 8) + static_cast<int>((j % 16) / 8);
  return w.x[word] < d.keep_threshold;
}

// The keep-mask as an array, contiguous (batch, L, S): one thread per Philox block, writing its four
// elements (where they fall inside L x S).
__global__ void attention_dropout_mask_kernel(AttentionDropout dropout, bool* keep, std::int64_t batch,
                                              std::int64_t L, std::int64_t S) {
  const std::int64_t blocks = batch * dropout.query_tiles * dropout.key_tiles * 64;
  for (std::int64_t n = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; n < blocks;
       n += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int a = static_cast<int>(n / 8 % 8), c = static_cast<int>(n % 8);
    const std::int64_t tile = n / 64;
    const std::int64_t j16 = tile % dropout.key_tiles, i16 = tile / dropout.key_tiles % dropout.query_tiles;
    const std::int64_t b = tile / dropout.key_tiles / dropout.query_tiles;
    const philox::Words w = attention_dropout_block(dropout, b, i16, j16, a, c);
    for (int word = 0; word < 4; ++word) {
      const std::int64_t i = 16 * i16 + a + 8 * (word / 2), j = 16 * j16 + c + 8 * (word % 2);
      if (i < L && j < S) keep[(b * L + i) * S + j] = !dropout.enabled || w.x[word] < dropout.keep_threshold;
    }
  }
}

}  // namespace adcuda
