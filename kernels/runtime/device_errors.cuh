// The kernel side of device_errors.h (for .cu files only).
#pragma once

#include "runtime/device_errors.h"

namespace adcuda {

// Reports `value` (outside [.., bound)) unless another thread on the device already reported an error
// that the host has not raised yet: the first one found is the one raised.
__device__ __forceinline__ void report_device_error(const DeviceErrorReport& report, long long value,
                                                    long long bound) {
  if (atomicCAS(report.claim, 0ull, 1ull) != 0ull) return;
  report.record->check = report.check;
  report.record->value = value;
  report.record->bound = bound;
  __threadfence_system();
  report.record->flag = 1;
}

}  // namespace adcuda
