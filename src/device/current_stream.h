// The calling thread's current stream per device, set through
// tdist::cuda::set_current_stream (include/tdist/cuda.h); runtimes read it.
#pragma once

namespace tdist::device {

// The stream set for `device` (>= 0) on this thread, or nullptr (default stream).
void* thread_current_stream(int device);
void set_thread_current_stream(int device, void* stream);

}  // namespace tdist::device
