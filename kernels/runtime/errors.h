// CUDA errors as C++ exceptions. Every CUDA runtime call goes through ADCUDA_CHECK, so a failure
// becomes adcuda::CudaError (bindings.cpp turns it into the Python exception adcuda._C.CudaError)
// instead of a silently ignored status or an aborted process.
//
// This header has no CUDA includes so that the host-only build and bindings.cpp can use the class;
// the macros are only expanded in .cu files, where cudaSuccess and cudaGetLastError exist.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace adcuda {

class CudaError : public std::runtime_error {
 public:
  CudaError(int code, std::string error_name, std::string description, std::string call, std::string location)
      : std::runtime_error("CUDA error: " + error_name + " (" + std::to_string(code) + "): " + description +
                           " [" + call + " at " + location + "]"),
        code_(code),
        error_name_(std::move(error_name)),
        description_(std::move(description)),
        call_(std::move(call)),
        location_(std::move(location)) {}

  int code() const noexcept { return code_; }
  const std::string& error_name() const noexcept { return error_name_; }
  const std::string& description() const noexcept { return description_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& location() const noexcept { return location_; }

 private:
  int code_;
  std::string error_name_;
  std::string description_;
  std::string call_;
  std::string location_;
};

// The caching allocator or the pinned pool could not get memory, even after releasing its cache.
// bindings.cpp turns it into adcuda.cuda.OutOfMemoryError (a RuntimeError).
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(const std::string& message, std::size_t requested_bytes)
      : std::runtime_error(message), requested_bytes_(requested_bytes) {}
  std::size_t requested_bytes() const noexcept { return requested_bytes_; }

 private:
  std::size_t requested_bytes_;
};

// CUDA was used in this process's parent before it forked: the child inherits a CUDA state it cannot
// use. bindings.cpp turns it into adcuda.cuda.BadForkError.
class ForkedProcessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA runtime version".
std::string describe_cuda_error(int status);

// "1.50 GiB", "512 B": byte counts in messages.
std::string format_bytes(std::size_t bytes);
std::string format_bytes(std::int64_t bytes);

// Throws the CudaError for a failed call. `status` is the call's cudaError_t.
[[noreturn]] void throw_cuda_error(int status, const char* call, const char* file, int line);

// Argument checks of the kernels' host sides: std::invalid_argument (ValueError in Python) "op: what".
inline void require(bool condition, const char* op, const std::string& what) {
  if (!condition) throw std::invalid_argument(std::string(op) + ": " + what);
}

}  // namespace adcuda

#define ADCUDA_CHECK(expr)                                                                    \
  do {                                                                                        \
    const cudaError_t adcuda_check_status_ = (expr);                                          \
    if (adcuda_check_status_ != cudaSuccess) {                                                \
      ::adcuda::throw_cuda_error(static_cast<int>(adcuda_check_status_), #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)

// After a kernel launch: reports a bad launch configuration or a missing kernel image for this GPU.
#define ADCUDA_CHECK_LAUNCH() ADCUDA_CHECK(cudaGetLastError())
