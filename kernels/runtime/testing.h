// Test support: work that keeps a stream busy for a known time, so tests can check that the runtime
// orders streams with events (a consumer that did not wait would read the data too early).
#pragma once

#include <cstdint>

namespace adcuda {

// Queues a kernel that spins for `cycles` GPU clock cycles on the calling thread's current stream.
void spin_current_stream(std::int64_t cycles);

}  // namespace adcuda
