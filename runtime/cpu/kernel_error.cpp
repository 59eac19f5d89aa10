// The error record of libotcrt_cpu (otcrt_kernel_error in otcrt/kernels.h):
// one OtcrtKernelError in host memory into which the kernels write the first
// bad value they read, the first writer winning (a compare-and-swap of its
// code, as threads of one OpenMP loop may find several). The loss kernels
// also return their label errors as a status, which stops the program at
// once; a generated gather cannot return one, so its index outside the
// axis (computed in the model: the inputs' ranges are checked as they are
// loaded) is only recorded. The gradient factor (sum_squares.cpp) reads the
// record, vetoing the step's update, and the driver reads it once the
// micro-step or the step is done, as on the cuda target. The ABI's
// otcrt_kernel_error and otcrt_kernel_error_record (kernels_abi.cpp) are
// errorRecord and takeError.
#include "kernels_cpu.h"

namespace otcrt {
namespace cpu {
namespace {

OtcrtKernelError record{};

} // namespace

void recordError(int32_t code, int64_t index, int64_t value, int64_t bound) {
  int32_t none = OTCRT_ERROR_NONE;
  if (!__atomic_compare_exchange_n(&record.code, &none, code, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  record.index = index;
  record.value = value;
  record.bound = bound;
}

bool errorRecorded() {
  return __atomic_load_n(&record.code, __ATOMIC_ACQUIRE) != OTCRT_ERROR_NONE;
}

OtcrtKernelError *errorRecord() { return &record; }

int takeError(OtcrtKernelError *error) {
  OtcrtKernelError found = record;
  found.code = __atomic_load_n(&record.code, __ATOMIC_ACQUIRE);
  record = OtcrtKernelError{};
  if (error)
    *error = found;
  return found.code;
}

} // namespace cpu
} // namespace otcrt
