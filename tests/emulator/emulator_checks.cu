// Checks of the CUDA emulator's execution model (kernels/emulator), written as an ordinary CUDA
// program: test_emulator.py rewrites it with kernels/emulator/rewrite_launches.py and compiles it with
// g++ against the emulator, the way an ADCUDA_CUDA=EMULATE build compiles kernels/*.cu. Each check
// prints "ok <name>" or "FAILED <name>: why"; the exit status is the number of failures.
//
// Usage: emulator_checks [name]   (no name: every check)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool condition, const char* check, const std::string& why) {
  if (!condition) {
    std::printf("FAILED %s: %s\n", check, why.c_str());
    ++failures;
  }
}

// The error a launch produced, after the work has run.
cudaError_t finish() {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) return launch;
  const cudaError_t run = cudaDeviceSynchronize();
  cudaGetLastError();
  return run;
}

template <typename T>
T* device_array(const std::vector<T>& host) {
  T* device = nullptr;
  cudaMalloc(&device, host.size() * sizeof(T));
  cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}

template <typename T>
std::vector<T> host_copy(const T* device, std::size_t n) {
  std::vector<T> host(n);
  cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

// --- a block-wide tree sum in shared memory: right only if every __syncthreads really waits
__global__ void block_sum(const int* in, int* out) {
  __shared__ int partial[256];
  partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

void check_block_barrier() {
  std::vector<int> values(4 * 256);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int>(i % 97);
  int* in = device_array(values);
  int* out = device_array(std::vector<int>(4, 0));
  block_sum<<<4, 256>>>(in, out);
  expect(finish() == cudaSuccess, "block_barrier", "launch failed");
  const std::vector<int> sums = host_copy(out, 4);
  for (int b = 0; b < 4; ++b) {
    int expected = 0;
    for (int i = 0; i < 256; ++i) expected += values[b * 256 + i];
    expect(sums[b] == expected, "block_barrier",
           "block " + std::to_string(b) + ": " + std::to_string(sums[b]) + " != " + std::to_string(expected));
  }
  cudaFree(in);
  cudaFree(out);
}

// --- threads that exit early do not hold up __syncthreads
__global__ void early_exit(int* out, int live) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  if (static_cast<int>(threadIdx.x) >= live) return;
  atomicAdd(&count, 1);
  __syncthreads();
  if (threadIdx.x == 0) *out = count;
}

void check_early_exit() {
  int* out = device_array(std::vector<int>(1, 0));
  early_exit<<<1, 128>>>(out, 40);
  expect(finish() == cudaSuccess, "early_exit", "launch failed");
  expect(host_copy(out, 1)[0] == 40, "early_exit", "count " + std::to_string(host_copy(out, 1)[0]));
  cudaFree(out);
}

// --- shuffles and votes, with the CUDA Programming Guide's source-lane rules
__global__ void shuffles(int* out) {
  const int lane = threadIdx.x % 32;
  int sum = lane;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  out[0 * 32 + lane] = sum;                                          // 496 everywhere
  out[1 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane, 3, 16);   // lane+3 inside each 16-lane half
  out[2 * 32 + lane] = __shfl_up_sync(0xffffffffu, lane, 2);         // lane-2, own value below 2
  out[3 * 32 + lane] = __shfl_sync(0xffffffffu, lane * 10, 5, 8);    // lane 5 of each 8-lane group
  out[4 * 32 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  out[5 * 32 + lane] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 7);
}

void check_shuffles() {
  int* out = device_array(std::vector<int>(6 * 32, -1));
  shuffles<<<1, 32>>>(out);
  expect(finish() == cudaSuccess, "shuffles", "launch failed");
  const std::vector<int> r = host_copy(out, 6 * 32);
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    const std::string at = " at lane " + std::to_string(lane);
    expect(r[lane] == 496, "shuffles", "xor butterfly sum " + std::to_string(r[lane]) + at);
    expect(r[32 + lane] == ((lane % 16) + 3 < 16 ? lane + 3 : lane), "shuffles", "shfl_down width 16" + at);
    expect(r[64 + lane] == (lane >= 2 ? lane - 2 : lane), "shuffles", "shfl_up" + at);
    expect(r[96 + lane] == ((lane / 8) * 8 + 5) * 10, "shuffles", "shfl width 8" + at);
    expect(static_cast<unsigned>(r[128 + lane]) == ballot, "shuffles", "ballot" + at);
    expect(r[160 + lane] == 3, "shuffles", "all/any" + at);
  }
  cudaFree(out);
}

// --- a shuffle that lane 0 never reaches: a hang on a GPU, a reported deadlock here
__global__ void deadlocks(int* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x), 0);
}

void check_deadlock_is_reported() {
  int* out = device_array(std::vector<int>(32, 0));
  deadlocks<<<1, 32>>>(out);
  const cudaError_t error = finish();
  expect(error == cudaErrorLaunchFailure, "deadlock", std::string("got ") + cudaGetErrorName(error));
  expect(std::strstr(cudaGetErrorString(error), "deadlock") != nullptr, "deadlock",
         std::string("message: ") + cudaGetErrorString(error));
  // The device stays usable afterwards.
  check_early_exit();
  cudaFree(out);
}

// --- launch limits
__global__ void uses_dynamic_shared(int* out) {
  extern __shared__ int scratch[];
  scratch[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x];
}

void check_launch_limits() {
  int* out = device_array(std::vector<int>(64, 0));
  uses_dynamic_shared<<<1, 2048>>>(out);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "launch_limits", "2048 threads per block accepted");
  uses_dynamic_shared<<<1, 64, 64 * 1024>>>(out);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "launch_limits",
         "64 KiB of dynamic shared memory accepted without the opt-in attribute");
  cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
  uses_dynamic_shared<<<1, 64, 64 * 1024>>>(out);
  expect(finish() == cudaSuccess, "launch_limits", "64 KiB refused after the opt-in attribute");
  expect(host_copy(out, 64)[0] == 63, "launch_limits", "dynamic shared memory contents");
  cudaFree(out);
}

// --- memory: fresh allocations read as 0xff bytes; copies outside an allocation fail
void check_memory() {
  float* device = nullptr;
  expect(cudaMalloc(&device, 16 * sizeof(float)) == cudaSuccess, "memory", "cudaMalloc failed");
  const std::vector<float> fresh = host_copy(device, 16);
  unsigned bits = 0;
  std::memcpy(&bits, &fresh[3], sizeof bits);
  expect(bits == 0xffffffffu, "memory", "fresh device memory is not poisoned");
  std::vector<float> host(32, 1.0f);
  expect(cudaMemcpy(device, host.data(), 32 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
         "memory", "a copy past the end of an allocation was accepted");
  cudaGetLastError();
  cudaFree(device);
}

// --- streams: work on a stream runs on its own thread, ordered after an event it waits for
__global__ void spin_then_write(int* flag, long long nanoseconds) {
  const long long start = clock64();
  while (clock64() - start < nanoseconds) {
  }
  *flag = 1;
}

__global__ void copy_flag(const int* flag, int* seen) { *seen = *flag; }

void check_streams() {
  int* flag = device_array(std::vector<int>(1, 0));
  int* seen = device_array(std::vector<int>(1, -1));
  cudaStream_t producer, consumer;
  cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  spin_then_write<<<1, 1, 0, producer>>>(flag, 50'000'000);
  cudaEventRecord(done, producer);
  expect(cudaStreamQuery(producer) == cudaErrorNotReady, "streams", "the producer finished at once");
  cudaStreamWaitEvent(consumer, done, 0);
  copy_flag<<<1, 1, 0, consumer>>>(flag, seen);
  cudaStreamSynchronize(consumer);
  expect(host_copy(seen, 1)[0] == 1, "streams", "the consumer ran before the event it waits for");
  expect(cudaEventQuery(done) == cudaSuccess, "streams", "the event is not complete after the wait");
  cudaEventDestroy(done);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
  cudaFree(flag);
  cudaFree(seen);
}

struct Check {
  const char* name;
  void (*run)();
};

const Check kChecks[] = {
    {"block_barrier", check_block_barrier}, {"early_exit", check_early_exit},
    {"shuffles", check_shuffles},           {"deadlock", check_deadlock_is_reported},
    {"launch_limits", check_launch_limits}, {"memory", check_memory},
    {"streams", check_streams},
};

}  // namespace

int main(int argc, char** argv) {
  for (const Check& check : kChecks) {
    if (argc > 1 && std::strcmp(argv[1], check.name) != 0) continue;
    const int before = failures;
    check.run();
    if (failures == before) std::printf("ok %s\n", check.name);
  }
  return failures;
}
