// The collectives of a data-parallel run, apart from the device backend
// (backend.h: memory, streams, launches). Two interfaces:
//  - Communicator: host values over the ranks (sums of doubles and floats,
//    ZeRO-1's reduce-scatter and all-gather, broadcast, the non-blocking
//    sums of the overlapped buckets). One implementation per transport:
//    MPI (mpi_communicator.cpp: mpirun, srun --mpi=pmix) and TCP from rank
//    0 (tcp_communicator.cpp: torchrun, plain srun). HostCollectives
//    (world.h) picks one from the launcher's environment and holds it.
//  - GradientCommunicator: the gradients in the arena summed over the
//    ranks, wherever the arena lives. The cpu library's sums them through
//    the host communicator (cpu/gradients.cpp); the cuda library's with
//    NCCL on the device (cuda/nccl_gradients.cpp), its communicator's id
//    handed from rank 0 through the host communicator, whichever it is.
#ifndef OTCRT_COMMUNICATOR_H
#define OTCRT_COMMUNICATOR_H

#include "otcrt/kernels.h"
#include "otcrt/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace otcrt {

class HostCollectives;
struct World;

/// Host values over the ranks of a run of more than one rank. Every rank
/// calls the same collectives in the same order; each call returns once
/// this rank's part is done. Sums are the same, bit for bit, on every rank.
class Communicator {
public:
  virtual ~Communicator() = default;
  /// How the ranks talk: "MPI", "TCP".
  virtual const char *transport() const = 0;
  /// Sums \p n doubles over the ranks, in place.
  virtual Status sum(double *values, int n) = 0;
  /// Sums \p n floats over the ranks, in place.
  virtual Status sumFloats(float *values, int64_t n) = 0;
  /// \p values holds size x \p perRank floats; each rank's are multiplied
  /// by \p preMul, and the sums of part r land in rank r's part of its
  /// \p values (the other parts are left as they were).
  virtual Status reduceScatterFloats(float *values, int64_t perRank,
                                     double preMul) = 0;
  /// \p base holds size parts of \p perRank bytes; every rank's part r
  /// becomes rank r's.
  virtual Status allGatherBytes(void *base, int64_t perRank) = 0;
  /// Starts summing \p n floats in place without waiting: they may be read
  /// only after waitSums().
  virtual Status startSum(float *values, int64_t n) = 0;
  /// Waits for every sum startSum started.
  virtual Status waitSums() = 0;
  /// Copies \p n bytes from rank 0 to every rank.
  virtual Status broadcast(void *bytes, int64_t n) = 0;
  /// Ends this process with \p code, and with it the run (MPI_Abort ends
  /// every rank; over TCP the others find its connections closed at their
  /// next collective).
  [[noreturn]] virtual void abortAll(int code) = 0;
};

/// Joins the run through MPI (MPI_Init, Open MPI's library loaded now):
/// null with \p status's error when it cannot. Waits are marked on
/// \p host (its timeout).
std::unique_ptr<Communicator>
mpiCommunicator(HostCollectives &host, const World &world, Status &status);

/// Joins the run over TCP: rank 0 listens on \p world's rendezvous port,
/// every other rank connects to its address (retrying until \p timeout
/// seconds have passed; 0: forever), and the host values then go through
/// rank 0, which sums in rank order. Null with \p status's error (one
/// line) when the port cannot be listened on or reached, or the ranks'
/// worlds disagree. Waits are marked on \p host (its timeout).
std::unique_ptr<Communicator> tcpCommunicator(HostCollectives &host,
                                              const World &world,
                                              double timeout, Status &status);

/// The gradients in the arena summed over the ranks of a data-parallel run
/// (the same values on every rank after), over the process's host
/// collectives. With a world of size 1 a sum is its pre-multiplier alone.
class GradientCommunicator {
public:
  virtual ~GradientCommunicator() = default;
  /// Sums the gradients in \p ranges (arena ranges, FP32 or BF16) over the
  /// ranks, in place, each rank's multiplied by \p preMul first.
  virtual Status sumGradients(char *arena,
                              const std::vector<OtcrtRange> &ranges,
                              double preMul) = 0;
  /// ZeRO-1 (OtcOptimizerShards): sums the gradient group at \p offset
  /// (ranks x \p perRank elements, BF16 when \p bf16) over the ranks, each
  /// rank's multiplied by \p preMul first, leaving the sums of rank r's part
  /// in rank r's part (the rest is not read afterwards).
  virtual Status reduceScatterGradients(char *arena, int64_t offset,
                                        int64_t perRank, bool bf16,
                                        double preMul) = 0;
  /// ZeRO-1: gathers the group at \p offset in place, rank r's part of
  /// \p bytesPerRank bytes from rank r.
  virtual Status allGather(char *arena, int64_t offset,
                           int64_t bytesPerRank) = 0;
  /// Whether a bucket of gradients (version 7) may be summed over the ranks
  /// while micro_step goes on: the cpu, whose micro_step has finished the
  /// bucket's kernels when it calls otcrt_gradients_ready (the host
  /// communicator's startSum), and a GPU with NCCL (sumsBucketsOnDevice).
  virtual bool overlapsGradientSum() const { return false; }
  /// Whether the bucket sums are queued on the device rather than run by
  /// the host: at otcrt_gradients_ready the bucket's kernels are queued,
  /// not finished, so startBucketSum queues the sum on the backend's
  /// communication stream behind them, and the step function LastMicroStep
  /// ends by making the compute stream wait for every sum it queued
  /// (inside its graph, so a replay sums as the capture did).
  virtual bool sumsBucketsOnDevice() const { return false; }
  /// Device sums: sets the multiplier of each rank's gradients in the sums
  /// startBucketSum queues from now on (read by the device when the sum
  /// runs, so a graph replays it with the value of its step).
  virtual Status setBucketPreMul(double preMul) {
    (void)preMul;
    return Status::error("these gradients are not summed on the device");
  }
  /// Device sums: queues the sum of \p ranges over the ranks on the
  /// communication stream, after the work queued so far on the compute
  /// stream. With \p marks, device marks marks[0] and marks[1]
  /// (Backend::mark) are recorded on the communication stream around it.
  virtual Status startBucketSum(char *arena,
                                const std::vector<OtcrtRange> &ranges,
                                const size_t *marks) {
    (void)arena, (void)ranges, (void)marks;
    return Status::error("these gradients are not summed on the device");
  }
};

/// The gradient sums of the library this driver was linked into (the cpu's
/// over the host collectives, the cuda's with NCCL), over
/// hostCollectives() and defaultBackend().
GradientCommunicator &defaultGradientCommunicator();

} // namespace otcrt

#endif // OTCRT_COMMUNICATOR_H
