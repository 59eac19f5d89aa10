// What the gather gradient of libotcrt_cuda (gather_grad.cu) tells its
// tests beside the ABI entry points (otcrt/kernels.h).
#ifndef OTCRT_CUDA_GATHER_GRAD_H
#define OTCRT_CUDA_GATHER_GRAD_H

#include <cstdint>

namespace otcrt {
namespace cuda {

/// Positions one sort of the gather gradient takes for a call of
/// `positions` positions into an axis of `axisLen` (the call adds them in
/// batches of this many, later batches into the stored result); 0 when the
/// sort's scratch cannot be sized.
int64_t gatherGradBatch(int64_t positions, int64_t axisLen);

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_GATHER_GRAD_H
