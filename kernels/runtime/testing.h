// Test support: work that keeps a stream busy for a known time, so tests can check that the runtime
// orders streams with events (a consumer that did not wait would read the data too early); a write
// the runtime does not track, as another library's would be; and a look inside a launch in progress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// Queues a kernel that spins for `cycles` GPU clock cycles on the calling thread's current stream.
void spin_current_stream(std::int64_t cycles);
// Queues a cudaMemsetAsync of `nbytes` at `pointer` on `stream` (a handle), untracked by the runtime.
void fill_bytes_untracked(std::uintptr_t pointer, std::size_t nbytes, int value, std::uintptr_t stream);
// The handle of `a`'s last stream while a KernelLaunch over it on the current stream is in progress
// (a spin is queued inside it), and after that launch has ended.
std::pair<std::uintptr_t, std::uintptr_t> last_stream_during_and_after_launch(const DeviceArray& a,
                                                                              std::int64_t cycles);

}  // namespace adcuda
