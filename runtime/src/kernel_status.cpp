//===- kernel_status.cpp - stopping on a failed library kernel ------------===//
//
// otcrt_kernel_failed, which generated programs call when a function of the
// kernel library (otcrt/kernels.h) returns a non-zero status: the library
// returns statuses, and the program stops here with one line naming the
// kernel and the ONNX node it computed. Also the driver's reading of the
// library's error record, where the cuda kernels leave the errors they find
// in the data, and the sink that holds failures back during a graph capture
// (kernel_status.h).
//
//===----------------------------------------------------------------------===//

#include "kernel_status.h"

#include "otcrt/kernels.h"

#include <cstdio>
#include <cstdlib>

namespace otcrt {
namespace {

std::string *heldFailures = nullptr;

} // namespace

/// The message of a data error the error record holds.
static std::string describe(const OtcrtKernelError &e) {
  if (e.code == OTCRT_ERROR_LABEL)
    return "label " + std::to_string(e.value) + " at row " +
           std::to_string(e.index) + " is outside [0, " +
           std::to_string(e.bound) + ")";
  if (e.code == OTCRT_ERROR_INDEX)
    return "gather index " + std::to_string(e.value) + " at position " +
           std::to_string(e.index) + " is outside [" +
           std::to_string(-e.bound) + ", " + std::to_string(e.bound) + ")";
  if (e.code == OTCRT_ERROR_PADDING)
    return "the attention mask of batch row " + std::to_string(e.index) +
           " is not right-padded (key " + std::to_string(e.value) + " of " +
           std::to_string(e.bound) +
           " is seen after a hidden one, or is neither seen nor hidden): "
           "cuDNN takes a key padding as per-sequence lengths; pad on the "
           "right, or set OTCRT_ATTENTION_PADDING=mask (the mask is then "
           "written out along the queries: more memory than the plan counts)";
  return "a kernel reported error " + std::to_string(e.code) + " at index " +
         std::to_string(e.index);
}

Status readKernelError(void *stream, const std::string &where) {
  OtcrtKernelError e{};
  if (otcrt_kernel_error(&e, stream) == OTCRT_ERROR_NONE)
    return Status::ok();
  return Status::error(describe(e) + where);
}

void holdKernelFailures(std::string *sink) { heldFailures = sink; }

bool holdKernelFailure(const std::string &message) {
  if (!heldFailures)
    return false;
  if (!heldFailures->empty())
    *heldFailures += "; ";
  *heldFailures += message;
  return true;
}

} // namespace otcrt

extern "C" void otcrt_kernel_failed(const char *kernel, const char *node,
                                    int status) {
  if (otcrt::holdKernelFailure(std::string(kernel) + " failed (status " +
                               std::to_string(status) + ") at node " + node))
    return;
  // A host kernel that returns a data error (the cpu loss kernels' label
  // outside the classes) has recorded what it found.
  OtcrtKernelError e{};
  if (status == OTCRT_ERROR_LABEL &&
      otcrt_kernel_error(&e, nullptr) == OTCRT_ERROR_LABEL) {
    std::fprintf(stderr, "otc train: error: %s (%s at node %s)\n",
                 otcrt::describe(e).c_str(), kernel, node);
    std::exit(1);
  }
  std::fprintf(stderr, "train: error: %s failed (status %d) at node %s\n",
               kernel, status, node);
  std::exit(1);
}
