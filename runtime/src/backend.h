// The device abstraction used by the otcrt driver: where the arena lives,
// how bytes move between it and the host, its streams and how step
// functions launch (the collectives between ranks are communicator.h's,
// apart from it). There is one implementation per
// library: cpu/backend.cpp (host memory) in libotcrt_cpu and
// cuda/backend.cpp (device memory) in libotcrt_cuda; each defines
// defaultBackend(). Arena pointers are opaque to the driver: it only ever
// passes them back to the backend or to the generated program.
#ifndef OTCRT_BACKEND_H
#define OTCRT_BACKEND_H

#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "otcrt/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otcrt {

/// The step functions of a program that a backend may replay as CUDA graphs.
/// LastMicroStep is micro_step run as a step's last micro-batch with its
/// gradient buckets' sums queued on the device as it goes
/// (GradientCommunicator::sumsBucketsOnDevice): a graph of its own, since a
/// replayed graph calls no host hook.
enum class StepFunction {
  ZeroGrads = 0,
  MicroStep = 1,
  OptimizerStep = 2,
  LastMicroStep = 3,
  EvalStep = 4,
  DecodeStep = 5
};

class Backend {
public:
  virtual ~Backend() = default;
  /// The target name this backend serves ("cpu" or "cuda"); must equal
  /// OtcProgram::target.
  virtual const char *name() const = 0;
  /// Prepares the device (selects it, checks it exists).
  virtual Status init() = 0;
  /// Before init(): the rank's device among those of its host, by its
  /// local rank (the cuda backend takes device localRank mod the count).
  virtual void selectDevice(int localRank) { (void)localRank; }
  /// A second stream for the device's gradient sums (communicator.h):
  /// made to wait for the work queued so far on the compute stream, it is
  /// returned in \p stream (a cudaStream_t on a GPU; created at the first
  /// call), and the step function that runs (runStep) ends by making the
  /// compute stream wait for everything queued on it since, inside its
  /// graph, so a replay waits as the capture did. Backends without
  /// streams (the cpu) have none.
  virtual Status forkCommunicationStream(void **stream) {
    *stream = nullptr;
    return Status::error("this backend has no communication stream");
  }
  /// Allocates \p bytes of arena memory into \p arena.
  virtual Status allocate(int64_t bytes, char **arena) = 0;
  /// Whether allocate() returns zeroed memory (the cpu's fresh mappings,
  /// whose pages exist only once touched): the driver then does not zero a
  /// new arena, so the bytes a run never touches (a sampling run's
  /// gradients and moments) cost nothing.
  virtual bool allocatesZeroed() const { return false; }
  /// Allocations from now on need not be backed by memory up front (the
  /// cpu maps them without reserving swap): for a run that touches a small
  /// part of its arena, as sampling does (the parameters and caches of a
  /// program whose arena also holds training state). A run that touches
  /// more than the machine has is then killed instead of refused at start.
  virtual void allocateLazily(bool) {}
  /// Frees an arena returned by allocate(); null is ignored.
  virtual void release(char *arena) = 0;
  /// Sets \p bytes bytes at \p arena + \p offset to zero.
  virtual Status zero(char *arena, int64_t offset, int64_t bytes) = 0;
  /// Copies \p bytes host bytes from \p src to \p arena + \p offset.
  virtual Status upload(char *arena, int64_t offset, const void *src,
                        int64_t bytes) = 0;
  /// Copies \p bytes from \p arena + \p offset to the host buffer \p dst.
  virtual Status download(const char *arena, int64_t offset, void *dst,
                          int64_t bytes) = 0;
  /// Queues the copy of \p bytes from \p src to \p dst, both where the
  /// arena lives (its bytes or those of another allocate()), behind the
  /// work queued so far; it does not wait.
  virtual Status copy(char *dst, const char *src, int64_t bytes) = 0;
  /// Queues the copy of \p bytes from \p src (where the arena lives) to
  /// \p dst, a hostBuffer(), behind the work queued so far; the bytes are
  /// there once synchronize() returns.
  virtual Status downloadAsync(const char *src, void *dst, int64_t bytes) = 0;
  /// Waits for all queued device work and reports asynchronous failures.
  virtual Status synchronize() = 0;
  /// \p bytes of host memory that the device's asynchronous copies can
  /// write without the host waiting (page-locked on a GPU), owned by the
  /// backend for its life; null when it cannot be had.
  virtual void *hostBuffer(size_t bytes) {
    hostBuffers_.emplace_back(bytes);
    return hostBuffers_.back().data();
  }
  /// Bytes of memory in use where the arena lives (host resident set on the
  /// cpu, device memory on a GPU); -1 when unknown.
  virtual int64_t memoryInUse() const { return -1; }
  /// Peak FLOP/s of the device for MFU at \p precision (OtcPrecision: a
  /// program's), from the one table of otcrt/device_peaks.h on a GPU; 0
  /// when unknown, as on the cpu.
  virtual double peakFlops(int32_t /*precision*/) const { return 0; }

  /// Turns replaying step functions as CUDA graphs on or off (off until
  /// called); returns false when this backend has no graphs (the cpu).
  virtual bool useGraphs(bool) { return false; }
  /// Runs \p fn, the program's function \p which, over \p arena. Without
  /// graphs it calls \p fn. With graphs the first call of each function runs
  /// eagerly (the warm-up: library plans, algorithm choices and first-call
  /// allocations happen there), the second captures it into a graph, and
  /// that call and every later one replay the graph. A function that cannot
  /// be captured keeps running eagerly, and \p warning then says why (once).
  virtual Status runStep(StepFunction which, void (*fn)(char *), char *arena,
                         std::string &warning) {
    (void)which;
    (void)warning;
    fn(arena);
    return Status::ok();
  }

  /// Device timestamps for `train --trace`, where the device runs behind the
  /// host: mark(i) records the i-th mark of a batch in the device's order
  /// of work, and markTimes waits for the first \p count marks and gives
  /// each one's time in milliseconds after mark 0. Backends without a
  /// device clock (the cpu) have none, and the trace reads the host clock.
  /// \p communication records the mark on the communication stream of
  /// the device sums instead.
  virtual bool hasDeviceMarks() const { return false; }
  virtual Status mark(size_t index, bool communication = false) {
    (void)index, (void)communication;
    return Status::ok();
  }
  virtual Status markTimes(size_t count, std::vector<double> &ms) {
    ms.assign(count, 0.0);
    return Status::ok();
  }

private:
  std::vector<std::vector<char>> hostBuffers_;
};

/// Returns the backend of the library this driver was linked into.
Backend &defaultBackend();

} // namespace otcrt

#endif // OTCRT_BACKEND_H
