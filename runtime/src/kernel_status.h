// The runtime's side of the kernel library's status API (otcrt/kernels.h):
// turning the library's error record into a Status, and holding back the
// failures that generated code reports while a CUDA graph is being captured
// (a capture only records work, so a failure there means "this function
// cannot be captured", not "stop the program").
#ifndef OTCRT_KERNEL_STATUS_H
#define OTCRT_KERNEL_STATUS_H

#include "otcrt/status.h"

#include <string>

namespace otcrt {

/// Reads the kernel library's error record once the work queued on
/// \p stream is done (one small copy) and clears it: ok when it is empty,
/// else an error such as "label 50304 at row 17 is outside [0, 50304)"
/// followed by \p where (e.g. " (step 3, micro-batch 0)").
Status readKernelError(void *stream, const std::string &where);

/// While \p sink is not null, otcrt_kernel_failed and otcrt_check_launch
/// append their failure to it instead of stopping the program.
void holdKernelFailures(std::string *sink);

/// Appends \p message to the sink set by holdKernelFailures and returns
/// true, or returns false when there is none.
bool holdKernelFailure(const std::string &message);

} // namespace otcrt

#endif // OTCRT_KERNEL_STATUS_H
