// Errors that kernels find in their inputs (an index out of range), reported without a host
// synchronisation on the hot path. The first kernel thread on a device that finds one claims the
// device's report (an atomic on device memory) and writes what it found into page-locked host memory
// mapped into the device. The runtime looks at that memory after each synchronising call (a copy to
// the host such as item() or .cpu(), synchronize(), Stream.synchronize(), Event.synchronize()) and
// raises DeviceSideError naming the op and the offending value: PyTorch's device-side asserts, but as
// a Python exception (adcuda.cuda.DeviceIndexError) instead of a dead CUDA context. The kernel that
// found the error has made its result harmless (no out-of-bounds access), not right.
//
// Plain C++ (no CUDA types): bindings include it; kernels include device_errors.cuh for the reporting.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace adcuda {

// What a report says went wrong; its message is made on the host.
enum class DeviceCheck : int {
  kEmbeddingIndex = 1,  // embedding: an index outside [0, num_embeddings)
  kIndexBounds = 2,     // indexing, gather, scatter: an index outside [-size, size)
};

// Written by the reporting kernel thread, read by the host.
struct DeviceErrorRecord {
  volatile int flag;  // set last: the other fields are complete
  volatile int check;
  volatile long long value;
  volatile long long bound;
};

// What a kernel reports with (pass it by value).
struct DeviceErrorReport {
  unsigned long long* claim;  // device memory: 0 until a thread claims the device's report
  DeviceErrorRecord* record;  // mapped host memory
  int check;                  // a DeviceCheck
};

// The report for kernels on `device` checking `check` (created on first use).
DeviceErrorReport device_error_report(int device, DeviceCheck check);
// Throws DeviceSideError for the error a kernel on any device reported since the last call, and
// clears it. Cheap when there is none (one read of host memory per device that has a report).
void raise_device_errors();

class DeviceSideError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

}  // namespace adcuda
