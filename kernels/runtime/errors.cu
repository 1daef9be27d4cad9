#include "runtime/errors.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "adcuda/build_config.h"

namespace adcuda {

std::string describe_cuda_error(int status) {
  const auto error = static_cast<cudaError_t>(status);
  return std::string(cudaGetErrorName(error)) + " (" + std::to_string(status) + "): " + cudaGetErrorString(error);
}

std::string format_bytes(std::size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

std::string format_bytes(std::int64_t bytes) {
  return bytes < 0 ? "-" + format_bytes(static_cast<std::size_t>(-bytes)) : format_bytes(static_cast<std::size_t>(bytes));
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
