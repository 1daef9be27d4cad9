#include "runtime/testing.h"

#include "runtime/errors.h"
#include "runtime/launch.cuh"
#include "runtime/stream.h"

namespace adcuda {

namespace {

__global__ void spin_kernel(std::int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

std::uintptr_t handle(cudaStream_t stream) { return reinterpret_cast<std::uintptr_t>(stream); }

}  // namespace

void spin_current_stream(std::int64_t cycles) {
  spin_kernel<<<1, 1, 0, current_stream()>>>(cycles);
  ADCUDA_CHECK_LAUNCH();
}

void fill_bytes_untracked(std::uintptr_t pointer, std::size_t nbytes, int value, std::uintptr_t stream) {
  ADCUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(pointer), value, nbytes, reinterpret_cast<cudaStream_t>(stream)));
}

std::pair<std::uintptr_t, std::uintptr_t> last_stream_during_and_after_launch(const DeviceArray& a,
                                                                              std::int64_t cycles) {
  std::uintptr_t during = 0;
  {
    KernelLaunch launch(a);
    spin_kernel<<<1, 1, 0, launch.stream()>>>(cycles);
    ADCUDA_CHECK_LAUNCH();
    during = handle(a.storage()->last_stream());
  }
  return {during, handle(a.storage()->last_stream())};
}

}  // namespace adcuda
