// The cuBLASLt path of `matmul` (gemm_cublaslt.cu), for gemm.cu. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "gemm_args.cuh"
#include "runtime/scalar_type.h"

namespace adcuda {

// Computes the product `args` describes (epilogue included) with cuBLASLt on `stream` and returns true;
// returns false, having done nothing, when cuBLASLt is not loaded, this is the emulated build, or the
// call is one cuBLASLt cannot express (an operand with no unit stride, batch dims that do not collapse
// to one stride, a strided bias, no algorithm for the epilogue): the caller then runs the hand-written
// kernels. `dtype` is the operands' (and the output's) type.
bool cublaslt_matmul(const GemmArgs& args, ScalarType dtype, int device, cudaStream_t stream);

}  // namespace adcuda
