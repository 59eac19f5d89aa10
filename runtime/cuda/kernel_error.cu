// The error record of libotcrt_cuda (otcrt_kernel_error in otcrt/kernels.h):
// one OtcrtKernelError in device memory, allocated and cleared once, into
// which kernels write the first bad value they read (recordError in
// common.cuh). A library call therefore never reads a flag back to the host
// inside a step, which a CUDA graph could not capture; the gradient factor
// (sum_squares.cu) reads it on the device, vetoing the step's update, and
// the driver reads it once the step is done.
#include "common.cuh"

#include <mutex>

namespace otcrt {
namespace cuda {

OtcrtKernelError *errorRecord() {
  static std::once_flag once;
  static OtcrtKernelError *record = nullptr;
  std::call_once(once, [] {
    void *p = nullptr;
    if (cudaMalloc(&p, sizeof(OtcrtKernelError)) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (cudaMemset(p, 0, sizeof(OtcrtKernelError)) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      (void)cudaFree(p);
      (void)cudaGetLastError();
      return;
    }
    record = static_cast<OtcrtKernelError *>(p);
  });
  return record;
}

} // namespace cuda
} // namespace otcrt

extern "C" int otcrt_kernel_error(OtcrtKernelError *error, void *streamArg) {
  OtcrtKernelError host{};
  OtcrtKernelError *record = otcrt::cuda::errorRecord();
  cudaStream_t stream = otcrt::cuda::asStream(streamArg);
  if (record) {
    cudaError_t err = cudaMemcpyAsync(&host, record, sizeof host,
                                      cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
      err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess && host.code != OTCRT_ERROR_NONE)
      err = cudaMemsetAsync(record, 0, sizeof host, stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      host = OtcrtKernelError{};
    }
  }
  if (error)
    *error = host;
  return host.code;
}

extern "C" OtcrtKernelError *otcrt_kernel_error_record(void) {
  return otcrt::cuda::errorRecord();
}
