// Fork safety. A child forked after its parent used CUDA inherits handles (contexts, streams, device
// pointers) that are meaningless in the child, and calling CUDA there fails or hangs. The runtime
// notes when this process first uses CUDA; a pthread_atfork handler marks children forked after that,
// and every runtime entry point refuses to run in them (destructors of inherited objects just forget
// their handles).
#pragma once

namespace adcuda {

// Called once CUDA state exists in this process (the driver found a device; a context, stream,
// memory or event was created).
void note_cuda_used();
// Whether this process has used CUDA (found a device, created a context, stream, memory or event).
bool cuda_was_used() noexcept;
// Whether this process is a child forked after its parent (or an ancestor) used CUDA.
bool in_bad_fork() noexcept;
// Throws ForkedProcessError naming `what` in such a child. Every runtime entry point calls it before
// touching CUDA.
void ensure_usable_after_fork(const char* what);

}  // namespace adcuda
