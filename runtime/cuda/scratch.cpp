// The device scratch of libotcrt_cuda (scratch.h): per device, one buffer
// per use, grown by cudaMalloc and never freed; and each device's SM count.
#include "scratch.h"

#include "otcrt/workspace.h"

#include <array>
#include <mutex>
#include <vector>

namespace otcrt {
namespace cuda {

char *scratch(ScratchUse use, size_t bytes, cudaStream_t stream) {
  struct Buffer {
    char *data = nullptr;
    size_t bytes = 0;
  };
  constexpr size_t kUses = static_cast<size_t>(ScratchUse::Count);
  static std::mutex mutex;
  static std::vector<std::array<Buffer, kUses>> perDevice;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return nullptr;
  const size_t need = bytes > 0 ? bytes : 1;
  std::lock_guard<std::mutex> lock(mutex);
  if (perDevice.size() <= static_cast<size_t>(device))
    perDevice.resize(device + 1);
  Buffer &buffer = perDevice[device][static_cast<size_t>(use)];
  if (buffer.bytes >= need)
    return buffer.data;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone)
    return nullptr;
  char *grown = nullptr;
  if (cudaMalloc(reinterpret_cast<void **>(&grown), need) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  buffer.data = grown;
  buffer.bytes = need;
  return grown;
}

float *reductionScratch(cudaStream_t stream) {
  return reinterpret_cast<float *>(scratch(
      ScratchUse::Reduction, OTCRT_CUDA_REDUCTION_SCRATCH_BYTES, stream));
}

char *sortScratch(cudaStream_t stream) {
  return scratch(ScratchUse::Sort, OTCRT_CUDA_SORT_SCRATCH_BYTES, stream);
}

int deviceSms() {
  static std::mutex mutex;
  static std::vector<int> perDevice;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (perDevice.size() <= static_cast<size_t>(device))
    perDevice.resize(device + 1, 0);
  int &sms = perDevice[device];
  if (sms == 0 && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                         device) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 1;
  }
  return sms > 0 ? sms : 1;
}

} // namespace cuda
} // namespace otcrt
