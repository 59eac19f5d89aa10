// CUDA backend of libotcrt_cuda: the arena is one cudaMalloc block on the
// current device; everything, the generated code's work included, runs on one
// non-blocking stream (otcrt_stream), and transfers wait for that stream
// where the host needs the bytes. A second stream of the highest priority
// carries the gradient sums that cuda/nccl_gradients.cpp queues
// (forkCommunicationStream), joined back before each step function ends.
// Step functions can be replayed as CUDA graphs (runStep), and `--trace`
// times kernels with events recorded on the stream (mark / markTimes).
// Every CUDA call is checked and failures carry file:line. Also defines
// otcrt_stream and otcrt_check_launch, which generated kernels call after each
// launch.
#include "src/backend.h"

#include "otcrt/abi.h"
#include "otcrt/bf16.h"
#include "otcrt/device_peaks.h"
#include "otcrt/kernels.h"
#include "src/kernel_status.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// "cudaErrorStreamCaptureUnsupported (operation not permitted when stream
/// is capturing)".
std::string errorText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
         ")";
}

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
    for (cudaEvent_t e : {computeDone_, sumsDone_})
      if (e)
        (void)cudaEventDestroy(e);
    if (commStream_)
      (void)cudaStreamDestroy(commStream_);
    for (Graph &g : graphs_)
      if (g.exec)
        (void)cudaGraphExecDestroy(g.exec);
    for (cudaEvent_t e : events_)
      (void)cudaEventDestroy(e);
    for (void *p : pinned_)
      (void)cudaFreeHost(p);
  }

  void *hostBuffer(size_t bytes) override {
    void *p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    pinned_.push_back(p);
    return p;
  }

  const char *name() const override { return "cuda"; }

  void selectDevice(int localRank) override { localRank_ = localRank; }

  /// The communication stream (the highest priority: a sum's blocks are
  /// scheduled as soon as SMs free up, not after every queued block of the
  /// backward) and its events, made at the first call.
  Status forkCommunicationStream(void **stream) override {
    if (!commStream_) {
      int least = 0, greatest = 0;
      OTCRT_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      OTCRT_CUDA_TRY(cudaStreamCreateWithPriority(
          &commStream_, cudaStreamNonBlocking, greatest));
      OTCRT_CUDA_TRY(
          cudaEventCreateWithFlags(&computeDone_, cudaEventDisableTiming));
      OTCRT_CUDA_TRY(
          cudaEventCreateWithFlags(&sumsDone_, cudaEventDisableTiming));
    }
    OTCRT_CUDA_TRY(cudaEventRecord(computeDone_, stream_));
    OTCRT_CUDA_TRY(cudaStreamWaitEvent(commStream_, computeDone_, 0));
    sumsQueued_ = true;
    *stream = commStream_;
    return Status::ok();
  }

  Status init() override {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
      return cudaStatus(err, "cudaGetDeviceCount", __FILE__, __LINE__);
    if (count == 0)
      return Status::error("no CUDA device is available");
    OTCRT_CUDA_TRY(cudaSetDevice(localRank_ % count));
    stream_ = static_cast<cudaStream_t>(otcrt_stream());
    if (!stream_)
      return Status::error("cannot create the CUDA stream of the runtime");
    // The kernel library's error record exists before any step runs.
    OtcrtKernelError none;
    (void)otcrt_kernel_error(&none, stream_);
    OTCRT_CUDA_TRY(cudaGetLastError());
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
    OTCRT_CUDA_TRY(cudaMemsetAsync(arena + offset, 0,
                                   static_cast<size_t>(bytes), stream_));
    return waitForStream();
  }

  /// Ordered after the work queued on the stream; returns once \p src may
  /// be reused. A copy that fits what is left of the staging buffer (the
  /// step's tokens, targets and scalars) is copied there and queued without
  /// waiting, so the device goes on with its queue; the buffer's bytes are
  /// used again only after the stream has been waited for (every staged
  /// copy done). A larger copy, or one while the stream is being captured
  /// into a graph (which must not record a copy of the staging buffer's
  /// bytes of the moment), waits for its copy.
  Status upload(char *arena, int64_t offset, const void *src,
                int64_t bytes) override {
    const int64_t slot =
        (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    OTCRT_CUDA_TRY(cudaStreamIsCapturing(stream_, &capture));
    if (capture == cudaStreamCaptureStatusNone && bytes > 0 &&
        staged_ + slot <= kStagingBytes && stagingBuffer()) {
      char *stage = staging_ + staged_;
      std::memcpy(stage, src, static_cast<size_t>(bytes));
      staged_ += slot;
      OTCRT_CUDA_TRY(cudaMemcpyAsync(arena + offset, stage,
                                     static_cast<size_t>(bytes),
                                     cudaMemcpyHostToDevice, stream_));
      return Status::ok();
    }
    OTCRT_CUDA_TRY(cudaMemcpyAsync(arena + offset, src,
                                   static_cast<size_t>(bytes),
                                   cudaMemcpyHostToDevice, stream_));
    return waitForStream();
  }

  /// Waits for the work queued on the stream, then for the bytes.
  Status download(const char *arena, int64_t offset, void *dst,
                  int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemcpyAsync(dst, arena + offset,
                                   static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToHost, stream_));
    return waitForStream();
  }

  Status copy(char *dst, const char *src, int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToDevice, stream_));
    return Status::ok();
  }

  Status downloadAsync(const char *src, void *dst, int64_t bytes) override {
    OTCRT_CUDA_TRY(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToHost, stream_));
    return Status::ok();
  }

  Status synchronize() override {
    OTCRT_CUDA_TRY(cudaDeviceSynchronize());
    OTCRT_CUDA_TRY(cudaGetLastError());
    staged_ = 0;
    return Status::ok();
  }

  int64_t memoryInUse() const override {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      return -1;
    return static_cast<int64_t>(totalBytes - freeBytes);
  }

  /// The dense peak at \p precision of the GPU's row of
  /// otcrt/device_peaks.h, found by its compute capability; 0 (MFU n/a)
  /// for a GPU the table lacks.
  double peakFlops(int32_t precision) const override {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
      return 0;
    return otcrt_peak_for(otcrt_device_peak_of(prop.major, prop.minor),
                          precision);
  }

  bool useGraphs(bool on) override {
    graphsOn_ = on;
    return true;
  }

  Status runStep(StepFunction which, void (*fn)(char *), char *arena,
                 std::string &warning) override {
    Graph &g = graphs_[static_cast<int>(which)];
    if (!g.exec && graphsOn_ && !g.failed && g.eagerRuns > 0) {
      std::string why = capture(fn, arena, g.exec);
      if (!why.empty()) {
        g.failed = true;
        warning = "CUDA graph capture of " + std::string(stepName(which)) +
                  " failed: " + why + "; it runs without a graph";
      }
    }
    if (g.exec && graphsOn_) {
      OTCRT_CUDA_TRY(cudaGraphLaunch(g.exec, stream_));
      return Status::ok();
    }
    ++g.eagerRuns;
    fn(arena);
    return joinSums();
  }

  bool hasDeviceMarks() const override { return true; }

  /// Events are created in batches of 256 the first time a mark index is
  /// used and reused by every later batch of marks.
  Status mark(size_t index, bool communication) override {
    while (events_.size() <= index / 256 * 256 + 255) {
      cudaEvent_t e;
      OTCRT_CUDA_TRY(cudaEventCreate(&e));
      events_.push_back(e);
    }
    OTCRT_CUDA_TRY(cudaEventRecord(
        events_[index], communication && commStream_ ? commStream_ : stream_));
    return Status::ok();
  }

  Status markTimes(size_t count, std::vector<double> &ms) override {
    ms.assign(count, 0.0);
    if (count == 0)
      return Status::ok();
    OTCRT_CUDA_TRY(cudaEventSynchronize(events_[count - 1]));
    for (size_t i = 1; i < count; ++i) {
      float t = 0;
      OTCRT_CUDA_TRY(cudaEventElapsedTime(&t, events_[0], events_[i]));
      ms[i] = t;
    }
    return Status::ok();
  }

private:
  /// One step function's graph: none until its second call.
  struct Graph {
    int64_t eagerRuns = 0;
    bool failed = false;
    cudaGraphExec_t exec = nullptr;
  };

  static const char *stepName(StepFunction which) {
    switch (which) {
    case StepFunction::ZeroGrads:
      return "zero_grads";
    case StepFunction::MicroStep:
      return "micro_step";
    case StepFunction::OptimizerStep:
      return "optimizer_step";
    case StepFunction::LastMicroStep:
      return "micro_step (a step's last, with its gradient sums)";
    case StepFunction::EvalStep:
      return "eval_step";
    case StepFunction::DecodeStep:
      return "decode_step";
    }
    return "?";
  }

  /// Captures fn(arena) on the stream into \p exec; returns why it could
  /// not, or "" (then nothing ran: a capture only records the work). The
  /// capture mode is global: the driver is single-threaded, so this costs
  /// nothing, and an unsafe call (a synchronization, an allocation or a
  /// launch on the legacy stream) from any thread, libraries' helper
  /// threads included, then invalidates the capture, which falls back to
  /// eager execution, instead of racing with it.
  std::string capture(void (*fn)(char *), char *arena, cudaGraphExec_t &exec) {
    (void)cudaGetLastError();
    cudaError_t err =
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return errorText(err);
    }
    std::string failures;
    holdKernelFailures(&failures);
    fn(arena);
    holdKernelFailures(nullptr);
    // The sums queued on the communication stream join the capture's
    // origin before it ends.
    if (Status s = joinSums(); !s)
      failures += (failures.empty() ? "" : "; ") + s.message();
    cudaGraph_t graph = nullptr;
    err = cudaStreamEndCapture(stream_, &graph);
    if (err == cudaSuccess && failures.empty())
      err = cudaGraphInstantiate(&exec, graph, 0);
    if (graph)
      (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    if (!failures.empty()) {
      if (exec)
        (void)cudaGraphExecDestroy(exec);
      exec = nullptr;
      return failures;
    }
    if (err != cudaSuccess) {
      exec = nullptr;
      return errorText(err);
    }
    return "";
  }

  /// The compute stream waits for the sums queued on the communication
  /// stream since the last join.
  Status joinSums() {
    if (!sumsQueued_)
      return Status::ok();
    sumsQueued_ = false;
    OTCRT_CUDA_TRY(cudaEventRecord(sumsDone_, commStream_));
    OTCRT_CUDA_TRY(cudaStreamWaitEvent(stream_, sumsDone_, 0));
    return Status::ok();
  }

  /// Overlapped gradient sums: the stream they run on, the compute work
  /// each waits for, their end, and whether any is queued but not joined.
  cudaStream_t commStream_ = nullptr;
  cudaEvent_t computeDone_ = nullptr;
  cudaEvent_t sumsDone_ = nullptr;
  bool sumsQueued_ = false;
  int localRank_ = 0;
  cudaStream_t stream_ = nullptr;
  bool graphsOn_ = false;
  Graph graphs_[6];
  std::vector<cudaEvent_t> events_;
  /// Page-locked host buffers of hostBuffer().
  std::vector<void *> pinned_;

  /// Waits for the stream: every staged upload is done, so the staging
  /// buffer is free again.
  Status waitForStream() {
    OTCRT_CUDA_TRY(cudaStreamSynchronize(stream_));
    staged_ = 0;
    return Status::ok();
  }

  /// The page-locked staging buffer of upload(), made on first use (null
  /// when it cannot be had: every upload then waits for its copy).
  char *stagingBuffer() {
    if (!staging_ && !stagingFailed_) {
      staging_ = static_cast<char *>(hostBuffer(kStagingBytes));
      stagingFailed_ = staging_ == nullptr;
    }
    return staging_;
  }
  static constexpr int64_t kStagingBytes = int64_t(8) << 20;
  static constexpr int64_t kStagingAlign = 256;
  char *staging_ = nullptr;
  bool stagingFailed_ = false;
  /// Bytes of the staging buffer whose copies may still be queued.
  int64_t staged_ = 0;
};

} // namespace

Backend &defaultBackend() {
  static CudaBackend backend;
  return backend;
}

} // namespace otcrt

/// The runtime's stream, created on the first call (non-blocking: it does
/// not wait for the legacy default stream, which a graph cannot capture).
extern "C" void *otcrt_stream(void) {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      (void)cudaGetLastError();
      s = nullptr;
    }
    return s;
  }();
  return stream;
}

/// Reports a failed kernel launch and terminates the process (exit code 1):
/// generated code has no error path, so this is the one place that exits.
/// During a graph capture the failure is held back instead (the capture is
/// dropped).
extern "C" void otcrt_check_launch(const char *file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    return;
  if (otcrt::holdKernelFailure(std::string("kernel launch at ") + file + ":" +
                               std::to_string(line) + ": " +
                               otcrt::errorText(err)))
    return;
  std::fprintf(
      stderr, "otc train: error: CUDA kernel launch failed at %s:%d: %s (%s)\n",
      file, line, cudaGetErrorName(err), cudaGetErrorString(err));
  std::fflush(stdout);
  std::exit(1);
}
