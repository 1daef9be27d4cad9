// The row loops of the CPU backend's layer norm, forward and backward (norm.cpp), built twice: for the
// baseline x86-64 (norm.cpp) and with AVX2 (norm_avx2.cpp), which the module calls only where
// ``choose_avx2()`` says so. One source, the same operations in the same order with no contraction
// (-ffp-contract=off): both builds give the same numbers bit for bit; the AVX2 one converts to double and
// adds four lanes an instruction (a transformer's 2048 x 96 activations: forward about 1.3x, backward
// about 1.8x faster). The loops live in a namespace named by ADCUDA_HOST_ISA, which the including file
// defines, so that the two builds' templates stay apart (optim_loops.h says why).
//
// A transformer's activations are thousands of rows a few hundred wide, where NumPy makes seven passes
// over the array forward and a dozen backward (each a ufunc or a BLAS product with a vector of ones). Here
// the forward reads x once per statistic and writes y (and the normalised x a replay keeps for the
// backward); the backward reads each array once for the row sums and once for dx while the column sums
// of dweight and dbias accumulate. Row statistics and column sums accumulate in double (eight partial
// sums a row, so that the adds need not wait on each other); the elementwise arithmetic is the NumPy
// path's, rounded as written.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace adcuda::host {

// One layer norm's arrays: ``rows`` rows of ``count`` values (w, b, kept: may be null).
template <typename T>
struct LayerNormRows {
  const T *x, *w, *b;
  T *y, *kept, *mean, *rstd;
  std::int64_t rows, count;
  double eps;
};

// Its backward's: dx, dw (may be null without a weight), db of g at x with the row statistics; ``kept``
// (may be null): the normalised x the forward kept, read instead of computed.
template <typename T>
struct LayerNormGrads {
  const T *g, *x, *w, *mean, *rstd, *kept;
  T *dx, *dw, *db;
  std::int64_t rows, count;
};

// Each build's loops (the GIL released by the caller), declared once for both namespaces.
#define ADCUDA_LAYER_NORM_LOOPS(T)                  \
  void layer_norm_rows(const LayerNormRows<T>& a); \
  void layer_norm_backward_rows(const LayerNormGrads<T>& a);
namespace baseline {
ADCUDA_LAYER_NORM_LOOPS(float)
ADCUDA_LAYER_NORM_LOOPS(double)
}  // namespace baseline
namespace avx2 {
ADCUDA_LAYER_NORM_LOOPS(float)
ADCUDA_LAYER_NORM_LOOPS(double)
}  // namespace avx2
#undef ADCUDA_LAYER_NORM_LOOPS

#ifdef ADCUDA_HOST_ISA
namespace ADCUDA_HOST_ISA {
namespace {

using Index = std::int64_t;

// The sum over k < n of term(k), in eight interleaved partial sums (independent adds, which the compiler
// also packs into vector registers).
template <typename Term>
double lane_sum(Index n, Term term) {
  double lanes[8] = {};
  Index k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) lanes[j] += term(k + j);
  for (; k < n; ++k) lanes[0] += term(k);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

template <typename T>
void forward(const LayerNormRows<T>& a) {
  const Index count = a.count;
  for (Index row = 0; row < a.rows; ++row) {
    const T* xr = a.x + row * count;
    const double mean = lane_sum(count, [&](Index k) { return double(xr[k]); }) / double(count);
    const double squares = lane_sum(count, [&](Index k) {
      const double d = double(xr[k]) - mean;
      return d * d;
    });
    const T m = T(mean), rstd = T(1.0 / std::sqrt(squares / double(count) + a.eps));
    a.mean[row] = m;
    a.rstd[row] = rstd;
    T* yr = a.y + row * count;
    if (a.w != nullptr && a.b != nullptr) {
      // (one pass, each element rounded as the passes below round it: the affine layer norm's case)
      T* kept = a.kept != nullptr ? a.kept + row * count : nullptr;
      if (kept != nullptr) {
        for (Index k = 0; k < count; ++k) {
          const T h = (xr[k] - m) * rstd;
          kept[k] = h;
          yr[k] = h * a.w[k] + a.b[k];
        }
      } else {
        for (Index k = 0; k < count; ++k) yr[k] = (xr[k] - m) * rstd * a.w[k] + a.b[k];
      }
      continue;
    }
    for (Index k = 0; k < count; ++k) yr[k] = (xr[k] - m) * rstd;
    if (a.kept != nullptr) std::copy(yr, yr + count, a.kept + row * count);
    if (a.w != nullptr)
      for (Index k = 0; k < count; ++k) yr[k] *= a.w[k];
    if (a.b != nullptr)
      for (Index k = 0; k < count; ++k) yr[k] += a.b[k];
  }
}

// dx = rstd (g w - mean(g w) - xhat mean(g w xhat)). Without a weight, w = 1 (times 1 is exact: the same
// numbers, and loops without a branch).
template <typename T>
void backward(const LayerNormGrads<T>& a) {
  const Index count = a.count;
  std::vector<double> weight_sums(count, 0.0), bias_sums(count, 0.0);
  std::vector<T> ones(a.w == nullptr ? count : 0, T(1)), row_xhat(count), row_gw(count), row_ghw(count);
  const T* w = a.w == nullptr ? ones.data() : a.w;
  T* gw = row_gw.data();
  T* ghw = row_ghw.data();
  double* ws = weight_sums.data();
  double* bs = bias_sums.data();
  for (Index row = 0; row < a.rows; ++row) {
    const T* gr = a.g + row * count;
    const T* xr = a.x + row * count;
    const T m = a.mean[row], r = a.rstd[row];
    const T* h = row_xhat.data();
    if (a.kept != nullptr) {
      h = a.kept + row * count;
    } else {
      for (Index k = 0; k < count; ++k) row_xhat[k] = (xr[k] - m) * r;
    }
    for (Index k = 0; k < count; ++k) {
      const T gh = gr[k] * h[k];
      ws[k] += double(gh);
      bs[k] += double(gr[k]);
      gw[k] = gr[k] * w[k];
      ghw[k] = gh * w[k];
    }
    const T gx_mean = T(lane_sum(count, [&](Index k) { return double(gw[k]); }) / double(count));
    const T proj = T(lane_sum(count, [&](Index k) { return double(ghw[k]); }) / double(count));
    T* dr = a.dx + row * count;
    for (Index k = 0; k < count; ++k) dr[k] = ((gw[k] - gx_mean) - h[k] * proj) * r;
  }
  for (Index k = 0; k < count; ++k) {
    if (a.dw != nullptr) a.dw[k] = T(ws[k]);
    a.db[k] = T(bs[k]);
  }
}

}  // namespace

void layer_norm_rows(const LayerNormRows<float>& a) { forward(a); }
void layer_norm_rows(const LayerNormRows<double>& a) { forward(a); }
void layer_norm_backward_rows(const LayerNormGrads<float>& a) { backward(a); }
void layer_norm_backward_rows(const LayerNormGrads<double>& a) { backward(a); }

}  // namespace ADCUDA_HOST_ISA
#endif

}  // namespace adcuda::host
