#include "runtime/errors.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "adcuda/build_config.h"

namespace adcuda {

std::string describe_cuda_error(int status) {
  const auto error = static_cast<cudaError_t>(status);
  return std::string(cudaGetErrorName(error)) + " (" + std::to_string(status) + "): " + cudaGetErrorString(error);
}

void throw_cuda_error(int status, const char* call, const char* file, int line) {
  // The runtime also records a non-sticky error as the thread's "last error"; clear it so that the next
  // ADCUDA_CHECK_LAUNCH reports its own launch, not this old failure.
  cudaGetLastError();
  const std::size_t prefix_length = std::strlen(ADCUDA_SOURCE_DIR);
  const char* relative_file = std::strncmp(file, ADCUDA_SOURCE_DIR, prefix_length) == 0 ? file + prefix_length : file;
  const auto error = static_cast<cudaError_t>(status);
  throw CudaError(status, cudaGetErrorName(error), cudaGetErrorString(error), call,
                  std::string(relative_file) + ":" + std::to_string(line));
}

}  // namespace adcuda
