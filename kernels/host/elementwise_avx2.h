// The host module's AVX2 loops (elementwise_avx2.cpp, the one file built with -mavx2 -mfma): called only
// after ``cpu_has_avx2()`` said yes at run time, so that the module still loads and runs on a CPU without
// AVX2, where the CPU backend keeps its NumPy path.
#pragma once

#include <cstddef>
#include <optional>

namespace adcuda::host {

// Whether this build has the AVX2 loops and this CPU runs them (AVX2 and FMA).
bool cpu_has_avx2();

// Which build of a loop built twice (baseline and AVX2: optim_loops.h, layer_norm_loops.h) ``who`` runs:
// the AVX2 one where the CPU has it, unless ``wanted`` says which (a test's way to run both); wanting AVX2
// where it is not raises std::runtime_error. (Defined in elementwise.cpp, baseline code.)
bool choose_avx2(const char* who, std::optional<bool> wanted);

// gelu_tanh over n float32 values: GeluTanh of functors.cuh, eight lanes at a time. ``inner`` (may be null)
// receives tanh's argument for each x, the value the backward below may read instead of computing it.
void gelu_tanh_avx2(const float* x, float* y, float* inner, std::ptrdiff_t n);

// g times gelu_tanh's derivative at x (GeluTanhBackward of functors.cuh); ``inner`` (may be null): what the
// forward wrote there for these x.
void gelu_tanh_backward_avx2(const float* x, const float* g, const float* inner, float* out, std::ptrdiff_t n);

// gelu (exact) over n float32 values, in PyTorch's CPU order x (1 + erf(x / sqrt 2)) / 2, erf as the CPU
// backend's NumPy formula.
void gelu_avx2(const float* x, float* y, std::ptrdiff_t n);

// g times gelu's derivative at x (GeluBackward of functors.cuh).
void gelu_backward_avx2(const float* x, const float* g, float* out, std::ptrdiff_t n);

// tanh (tanh_ of functors.cuh) over n float32 values, eight lanes at a time; y may be x. For the LSTM
// layer's steps (recurrent.cpp), which activate a row of gates at a time.
void tanh_avx2(const float* x, float* y, std::ptrdiff_t n);

// Attention's softmax over ``rows`` rows of S float32 scores in place (attention.cpp's softmax_rows, eight
// lanes at a time): row r sees its first seen(r) keys, where ``causal``, min(S, r % L + 1), else all S.
void attention_softmax_avx2(float* s, float* lse, std::ptrdiff_t rows, std::ptrdiff_t L, std::ptrdiff_t S,
                            bool causal);

// One batch entry's scores and their softmax (attention.cpp's scores_softmax): the rows of the scaled
// queries q (L x E, row-major) against the keys' transpose kt (E rows of ``width`` >= S rounded up to 32,
// zero past S), each row's seen scores (as attention_softmax_avx2's) into p (L x S, row-major) and made
// probabilities there, the logsumexps into lse (L).
void attention_scores_softmax_avx2(const float* q, const float* kt, float* p, float* lse, std::ptrdiff_t L,
                                   std::ptrdiff_t S, std::ptrdiff_t E, std::ptrdiff_t width, bool causal);

// The scores' gradient from the probabilities' in place (attention.cpp's softmax_backward_rows):
// dp = p (dp - delta[r]) scale along each of ``rows`` rows of S.
void attention_softmax_backward_avx2(float* dp, const float* p, const float* delta, float scale,
                                     std::ptrdiff_t rows, std::ptrdiff_t S);

}  // namespace adcuda::host
