// The device abstraction used by the otcrt driver: where the arena lives and
// how bytes move between it and the host. There is one implementation per
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

class HostCollectives;

/// The step functions of a program that a backend may replay as CUDA graphs.
/// LastMicroStep is micro_step run as a step's last micro-batch with its
/// gradient buckets' sums queued on the device as it goes
/// (sumsBucketsOnDevice): a graph of its own, since a replayed graph calls
/// no host hook.
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
  /// Sums the gradients in \p ranges (arena ranges, FP32 or BF16) over the
  /// ranks of a data-parallel run, in place, each rank's multiplied by
  /// \p preMul first; the same values on every rank after. \p host carries
  /// them where the arena is host memory (the cpu: MPI); a GPU backend
  /// sums on the device (NCCL).
  virtual Status sumGradients(char *arena,
                              const std::vector<OtcrtRange> &ranges,
                              double preMul, HostCollectives &host) = 0;
  /// ZeRO-1 (OtcOptimizerShards): sums the gradient group at \p offset
  /// (ranks x \p perRank elements, BF16 when \p bf16) over the ranks, each
  /// rank's multiplied by \p preMul first, leaving the sums of rank r's part
  /// in rank r's part (the rest is not read afterwards).
  virtual Status reduceScatterGradients(char *arena, int64_t offset,
                                        int64_t perRank, bool bf16,
                                        double preMul,
                                        HostCollectives &host) = 0;
  /// ZeRO-1: gathers the group at \p offset in place, rank r's part of
  /// \p bytesPerRank bytes from rank r.
  virtual Status allGather(char *arena, int64_t offset, int64_t bytesPerRank,
                           HostCollectives &host) = 0;
  /// Whether a bucket of gradients (version 7) may be summed over the ranks
  /// while micro_step goes on: the cpu, whose micro_step has finished the
  /// bucket's kernels when it calls otcrt_gradients_ready, and a GPU with
  /// NCCL (sumsBucketsOnDevice).
  virtual bool overlapsGradientSum() const { return false; }
  /// Whether the bucket sums are queued on the device rather than run by
  /// the host: at otcrt_gradients_ready the bucket's kernels are queued,
  /// not finished, so startBucketSum queues the sum on a communication
  /// stream behind them, and the step function LastMicroStep ends by
  /// making the compute stream wait for every sum it queued (inside its
  /// graph, so a replay sums as the capture did).
  virtual bool sumsBucketsOnDevice() const { return false; }
  /// Device sums: sets the multiplier of each rank's gradients in the sums
  /// startBucketSum queues from now on (read by the device when the sum
  /// runs, so a graph replays it with the value of its step).
  virtual Status setBucketPreMul(double preMul, HostCollectives &host) {
    (void)preMul, (void)host;
    return Status::error("this backend does not sum gradients on the device");
  }
  /// Device sums: queues the sum of \p ranges over the ranks on the
  /// communication stream, after the work queued so far on the compute
  /// stream. With \p marks, device marks marks[0] and marks[1] (see mark)
  /// are recorded on the communication stream around the sum.
  virtual Status startBucketSum(char *arena,
                                const std::vector<OtcrtRange> &ranges,
                                HostCollectives &host, const size_t *marks) {
    (void)arena, (void)ranges, (void)host, (void)marks;
    return Status::error("this backend does not sum gradients on the device");
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
  /// Peak FLOP/s of the device for MFU (dense BF16 tensor-core peak on a
  /// GPU); 0 when unknown, as on the cpu.
  virtual double peakFlops() const { return 0; }

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
