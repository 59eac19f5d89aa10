// CUDA backend of libotcrt_cuda: the arena is one cudaMalloc block on the
// current device; everything, the generated code's work included, runs on one
// non-blocking stream (otcrt_stream), and transfers wait for that stream
// where the host needs the bytes. Step functions can be replayed as CUDA
// graphs (runStep), and `--trace` times kernels with events recorded on the
// stream (mark / markTimes). Every CUDA call is checked and failures carry
// file:line. Also defines otcrt_stream and otcrt_check_launch, which
// generated kernels call after each launch.
#include "src/backend.h"

#include "otcrt/abi.h"
#include "otcrt/bf16.h"
#include "otcrt/kernels.h"
#include "src/kernel_status.h"
#include "src/world.h"

#include <cuda_runtime.h>
#ifdef OTCRT_HAVE_NCCL
#include "src/dynamic_library.h"

#include <nccl.h>
#endif

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

#ifdef OTCRT_HAVE_NCCL
/// NCCL, loaded when a run has more than one rank: a program links no NCCL
/// and runs alone without it.
struct NcclLibrary {
  DynamicLibrary library;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclRedOpCreatePreMulSum) redOpCreatePreMulSum = nullptr;
  decltype(&ncclRedOpDestroy) redOpDestroy = nullptr;
  decltype(&ncclGetErrorString) errorString = nullptr;

  /// Loads it; false with \p why when it cannot be.
  bool load(std::string &why) {
    if (library.isOpen())
      return true;
    if (!library.open({"libnccl.so.2", "libnccl.so"}, why)) {
      why = "cannot load NCCL's libnccl.so.2 (" + why + ")";
      return false;
    }
    DynamicLibrary &l = library;
    bool ok = l.bind(getUniqueId, "ncclGetUniqueId") &&
              l.bind(commInitRank, "ncclCommInitRank") &&
              l.bind(commDestroy, "ncclCommDestroy") &&
              l.bind(allReduce, "ncclAllReduce") &&
              l.bind(reduceScatter, "ncclReduceScatter") &&
              l.bind(allGather, "ncclAllGather") &&
              l.bind(redOpCreatePreMulSum, "ncclRedOpCreatePreMulSum") &&
              l.bind(redOpDestroy, "ncclRedOpDestroy") &&
              l.bind(errorString, "ncclGetErrorString");
    if (!ok)
      why = "the NCCL library loaded lacks a function (NCCL 2.11 or later "
            "is needed)";
    return ok;
  }
};
#endif

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
#ifdef OTCRT_HAVE_NCCL
    if (nccl_) {
      for (ncclRedOp_t op : preMulOps_)
        if (op != ncclSum)
          (void)ncclLib_.redOpDestroy(op, nccl_);
      (void)ncclLib_.commDestroy(nccl_);
    }
    if (preMulScalars_)
      (void)cudaFree(preMulScalars_);
#endif
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

  /// NCCL's all-reduce on the runtime's stream, over a communicator made
  /// at the first call (its id from rank 0 through MPI); a rank's share
  /// multiplies its gradients in the reduction (ncclRedOpCreatePreMulSum).
  Status sumGradients(char *arena, const std::vector<OtcrtRange> &ranges,
                      double preMul, HostCollectives &host) override {
#ifdef OTCRT_HAVE_NCCL
    // One rank alone sums nothing, unless the test hook asks for NCCL's
    // sum over a communicator of this GPU alone.
    static const bool alone = std::getenv("OTC_TEST_COLLECTIVES_ALONE") != nullptr;
    if (!host.joined() && !alone)
      return preMul == 1.0 ? Status::ok() : scaleRanges(arena, ranges, preMul);
    if (Status s = communicator(host); !s)
      return s;
    for (const OtcrtRange &r : ranges) {
      ncclDataType_t type = r.bf16 ? ncclBfloat16 : ncclFloat32;
      ncclRedOp_t op = ncclSum;
      if (Status s = preMulSum(preMul, r.bf16, op); !s)
        return s;
      void *p = arena + r.offset;
      Status s = ncclTry(ncclLib_.allReduce(p, p, static_cast<size_t>(r.count),
                                            type, op, nccl_, stream_),
                         "ncclAllReduce");
      if (op != ncclSum)
        (void)ncclLib_.redOpDestroy(op, nccl_);
      if (!s)
        return s;
    }
    return Status::ok();
#else
    (void)arena;
    (void)ranges;
    (void)preMul;
    if (host.joined())
      return Status::error("this runtime was built without NCCL: the cuda "
                           "target runs one rank only");
    return Status::ok();
#endif
  }

  /// ZeRO-1's reduce-scatter, in place (NCCL reads the whole group and
  /// writes this rank's part of it).
  Status reduceScatterGradients(char *arena, int64_t offset, int64_t perRank,
                                bool bf16, double preMul,
                                HostCollectives &host) override {
#ifdef OTCRT_HAVE_NCCL
    if (Status s = shardedCommunicator(host); !s)
      return s;
    ncclRedOp_t op = ncclSum;
    if (Status s = preMulSum(preMul, bf16, op); !s)
      return s;
    char *p = arena + offset;
    const int64_t element = bf16 ? 2 : 4;
    Status s = ncclTry(
        ncclLib_.reduceScatter(p, p + host.world().rank * perRank * element,
                               static_cast<size_t>(perRank),
                               bf16 ? ncclBfloat16 : ncclFloat32, op, nccl_,
                               stream_),
        "ncclReduceScatter");
    if (op != ncclSum)
      (void)ncclLib_.redOpDestroy(op, nccl_);
    return s;
#else
    (void)arena, (void)offset, (void)perRank, (void)bf16, (void)preMul,
        (void)host;
    return Status::error("this runtime was built without NCCL: the cuda "
                         "target runs one rank only");
#endif
  }

  /// ZeRO-1's all-gather, in place.
  Status allGather(char *arena, int64_t offset, int64_t bytesPerRank,
                   HostCollectives &host) override {
#ifdef OTCRT_HAVE_NCCL
    if (Status s = shardedCommunicator(host); !s)
      return s;
    char *p = arena + offset;
    return ncclTry(
        ncclLib_.allGather(p + host.world().rank * bytesPerRank, p,
                           static_cast<size_t>(bytesPerRank), ncclInt8, nccl_,
                           stream_),
        "ncclAllGather");
#else
    (void)arena, (void)offset, (void)bytesPerRank, (void)host;
    return Status::error("this runtime was built without NCCL: the cuda "
                         "target runs one rank only");
#endif
  }

#ifdef OTCRT_HAVE_NCCL
  bool overlapsGradientSum() const override { return true; }
  bool sumsBucketsOnDevice() const override { return true; }

  /// Writes \p preMul to the device scalars (FP32 and BF16) that the
  /// bucket sums' operators read when they run; the communicator, the
  /// communication stream, its events and the operators are made at the
  /// first call.
  Status setBucketPreMul(double preMul, HostCollectives &host) override {
    if (Status s = communicator(host); !s)
      return s;
    if (!commStream_) {
      // The highest priority: a sum's blocks are scheduled as soon as SMs
      // free up, not after every queued block of the backward.
      int least = 0, greatest = 0;
      OTCRT_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      OTCRT_CUDA_TRY(cudaStreamCreateWithPriority(
          &commStream_, cudaStreamNonBlocking, greatest));
      OTCRT_CUDA_TRY(
          cudaEventCreateWithFlags(&computeDone_, cudaEventDisableTiming));
      OTCRT_CUDA_TRY(cudaEventCreateWithFlags(&sumsDone_, cudaEventDisableTiming));
      OTCRT_CUDA_TRY(cudaMalloc(&preMulScalars_, 8));
      const ncclDataType_t types[2] = {ncclFloat32, ncclBfloat16};
      for (int i = 0; i < 2; ++i)
        if (Status s = ncclTry(ncclLib_.redOpCreatePreMulSum(
                                   &preMulOps_[i], preMulScalars_ + 4 * i,
                                   types[i], ncclScalarDevice, nccl_),
                               "ncclRedOpCreatePreMulSum");
            !s)
          return s;
    }
    const float f = static_cast<float>(preMul);
    const uint16_t b = otcrt_float_to_bf16(f);
    char bytes[8] = {};
    std::memcpy(bytes, &f, 4);
    std::memcpy(bytes + 4, &b, 2);
    return upload(preMulScalars_, 0, bytes, sizeof(bytes));
  }

  /// The communication stream waits for the work queued so far on the
  /// compute stream, then runs NCCL's all-reduce of each range; runStep
  /// joins it back before the step function ends.
  Status startBucketSum(char *arena, const std::vector<OtcrtRange> &ranges,
                        HostCollectives &host, const size_t *marks) override {
    if (!commStream_)
      return Status::error("a bucket's sum started before its multiplier "
                           "was set (setBucketPreMul)");
    (void)host;
    OTCRT_CUDA_TRY(cudaEventRecord(computeDone_, stream_));
    OTCRT_CUDA_TRY(cudaStreamWaitEvent(commStream_, computeDone_, 0));
    sumsQueued_ = true;
    if (marks)
      if (Status s = mark(marks[0], true); !s)
        return s;
    for (const OtcrtRange &r : ranges) {
      void *p = arena + r.offset;
      if (Status s = ncclTry(
              ncclLib_.allReduce(p, p, static_cast<size_t>(r.count),
                                 r.bf16 ? ncclBfloat16 : ncclFloat32,
                                 preMulOps_[r.bf16 ? 1 : 0], nccl_, commStream_),
              "ncclAllReduce (an overlapped bucket)");
          !s)
        return s;
    }
    if (marks)
      return mark(marks[1], true);
    return Status::ok();
  }
#endif

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

#ifdef OTCRT_HAVE_NCCL
  Status ncclTry(ncclResult_t r, const char *what) {
    if (r == ncclSuccess)
      return Status::ok();
    return Status::error(std::string(what) +
                         " failed: " + ncclLib_.errorString(r));
  }
  /// The communicator, made at the first call (its id from rank 0 through
  /// MPI).
  Status communicator(HostCollectives &host) {
    if (nccl_)
      return Status::ok();
    const World &world = host.world();
    std::string why;
    if (!ncclLib_.load(why))
      return Status::error(why);
    ncclUniqueId id;
    if (world.isRoot())
      if (Status s = ncclTry(ncclLib_.getUniqueId(&id), "ncclGetUniqueId"); !s)
        return s;
    if (Status s = host.broadcast(&id, sizeof(id)); !s)
      return s;
    return ncclTry(ncclLib_.commInitRank(&nccl_, world.size, id, world.rank),
                   "ncclCommInitRank");
  }
  /// The communicator of a sharded optimizer's collectives, which need the
  /// ranks of a data-parallel run.
  Status shardedCommunicator(HostCollectives &host) {
    if (!host.joined())
      return Status::error("a sharded optimizer needs the ranks of a "
                           "data-parallel run (mpirun)");
    return communicator(host);
  }
  /// A sum that multiplies each rank's values by \p preMul first (ncclSum
  /// when it is 1), in `op`; the caller destroys one that is not ncclSum.
  Status preMulSum(double preMul, bool bf16, ncclRedOp_t &op) {
    op = ncclSum;
    if (preMul == 1.0)
      return Status::ok();
    float f = static_cast<float>(preMul);
    uint16_t b = otcrt_float_to_bf16(f);
    return ncclTry(ncclLib_.redOpCreatePreMulSum(
                       &op, bf16 ? static_cast<void *>(&b) : static_cast<void *>(&f),
                       bf16 ? ncclBfloat16 : ncclFloat32, ncclScalarHostImmediate,
                       nccl_),
                   "ncclRedOpCreatePreMulSum");
  }
  Status scaleRanges(char *arena, const std::vector<OtcrtRange> &ranges,
                     double factor) {
    if (otcrt_scale_ranges(arena, static_cast<int32_t>(ranges.size()),
                           ranges.data(), static_cast<float>(factor),
                           stream_) != 0)
      return Status::error("scaling the gradients (otcrt_scale_ranges) failed");
    return Status::ok();
  }
  NcclLibrary ncclLib_;
  ncclComm_t nccl_ = nullptr;
  /// The bucket sums' operators (FP32, BF16), which multiply each rank's
  /// values by the device scalars at preMulScalars_ (FP32 at 0, BF16 at 4).
  ncclRedOp_t preMulOps_[2] = {ncclSum, ncclSum};
  char *preMulScalars_ = nullptr;
#endif
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
