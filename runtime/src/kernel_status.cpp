//===- kernel_status.cpp - stopping on a failed library kernel ------------===//
//
// otcrt_kernel_failed, which generated programs call when a function of the
// kernel library (otcrt/kernels.h) returns a non-zero status: the library
// returns statuses, and the program stops here with one line naming the
// kernel and the ONNX node it computed.
//
//===----------------------------------------------------------------------===//

#include "otcrt/kernels.h"

#include <cstdio>
#include <cstdlib>

extern "C" void otcrt_kernel_failed(const char *kernel, const char *node,
                                    int status) {
  std::fprintf(stderr, "train: error: %s failed (status %d) at node %s\n",
               kernel, status, node);
  std::exit(1);
}
