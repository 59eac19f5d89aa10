// CUDA backend of libotcrt_cuda: the arena is one cudaMalloc block on the
// current device and transfers are synchronous cudaMemcpy on the default
// stream. Every CUDA call is checked and failures carry file:line. Also
// defines otcrt_check_launch, which generated kernels call after each launch.
#include "backend.h"

#include "otcrt/abi.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace otcrt {
namespace {

/// Turns a CUDA error into a Status naming the call site.
Status cudaStatus(cudaError_t err, const char *what, const char *file,
                  int line) {
  if (err == cudaSuccess)
    return Status::ok();
  return Status::error(std::string("CUDA error in ") + what + " at " + file +
                       ":" + std::to_string(line) + ": " +
                       cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                       ")");
}

#define OTCRT_CUDA_TRY(call)                                                   \
  do {                                                                         \
    Status status_ = cudaStatus((call), #call, __FILE__, __LINE__);            \
    if (!status_)                                                              \
      return status_;                                                          \
  } while (0)

class CudaBackend final : public Backend {
public:
  const char *name() const override { return "cuda"; }

  Status init() override {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
      return cudaStatus(err, "cudaGetDeviceCount", __FILE__, __LINE__);
    if (count == 0)
      return Status::error("no CUDA device is available");
    OTCRT_CUDA_TRY(cudaSetDevice(0));
    return Status::ok();
  }

  Status allocate(int64_t bytes, char **arena) override {
    void *p = nullptr;
    OTCRT_CUDA_TRY(cudaMalloc(&p, static_cast<size_t>(bytes > 0 ? bytes : 1)));
    *arena = static_cast<char *>(p);
    return Status::ok();
  }

  void release(char *arena) override {
    if (arena)
      (void)cudaFree(arena);
  }

  Status zero(char *arena, int64_t offset, int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemset(arena + offset, 0, static_cast<size_t>(bytes)));
    return Status::ok();
  }

  Status upload(char *arena, int64_t offset, const void *src,
                int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemcpy(arena + offset, src, static_cast<size_t>(bytes),
                              cudaMemcpyHostToDevice));
    return Status::ok();
  }

  Status download(const char *arena, int64_t offset, void *dst,
                  int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemcpy(dst, arena + offset, static_cast<size_t>(bytes),
                              cudaMemcpyDeviceToHost));
    return Status::ok();
  }

  Status synchronize() override {
    OTCRT_CUDA_TRY(cudaDeviceSynchronize());
    OTCRT_CUDA_TRY(cudaGetLastError());
    return Status::ok();
  }

  int64_t memoryInUse() const override {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      return -1;
    return static_cast<int64_t>(totalBytes - freeBytes);
  }

  /// Dense BF16 tensor-core peak of the known data-centre GPUs (H100/H200
  /// SXM: 989.4 TFLOP/s; A100: 312); 0 (MFU n/a) for others.
  double peakFlops() const override {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
      return 0;
    if (prop.major == 9)
      return 989.4e12;
    if (prop.major == 8 && prop.minor == 0)
      return 312e12;
    return 0;
  }
};

} // namespace

Backend &defaultBackend() {
  static CudaBackend backend;
  return backend;
}

} // namespace otcrt

/// Reports a failed kernel launch and terminates the process (exit code 1):
/// generated code has no error path, so this is the one place that exits.
extern "C" void otcrt_check_launch(const char *file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    return;
  std::fprintf(stderr, "otc train: error: CUDA kernel launch failed at %s:%d: %s (%s)\n",
               file, line, cudaGetErrorName(err), cudaGetErrorString(err));
  std::fflush(stdout);
  std::exit(1);
}
