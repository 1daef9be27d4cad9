#include "runtime/testing.h"

#include "runtime/errors.h"
#include "runtime/stream.h"

namespace adcuda {

namespace {

__global__ void spin_kernel(std::int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void spin_current_stream(std::int64_t cycles) {
  spin_kernel<<<1, 1, 0, current_stream()>>>(cycles);
  ADCUDA_CHECK_LAUNCH();
}

}  // namespace adcuda
