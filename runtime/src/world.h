// The ranks of a data-parallel run and the collectives between them. A
// `train` program started by mpirun or srun (through MPI) is one rank of
// the run: it reads its part of every global batch, and the gradients of
// all ranks are summed before the optimizer step (each rank's pre-scaled by
// its share), so the step equals one process's gradient accumulation over
// the whole batch. MPI launches and bootstraps the ranks and carries the
// host values (target counts, losses, flags) and, on the cpu target, the
// gradients; on the cuda target NCCL sums the gradients on the device
// (Backend::sumGradients). Started alone, a program is world size 1 and
// never calls MPI.
#ifndef OTCRT_WORLD_H
#define OTCRT_WORLD_H

#include "otcrt/status.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace otcrt {

/// Where this process stands in the run.
struct World {
  int rank = 0;      ///< 0 .. size-1
  int size = 1;      ///< number of ranks
  int localRank = 0; ///< rank among those on this host: picks the device
  /// What launched the ranks ("mpirun", "srun", "torchrun"), or empty.
  std::string launcher;
  bool isRoot() const { return rank == 0; }
};

/// The world as the launcher's environment variables describe it: Open
/// MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}, PMI/PMIx's (srun with
/// --mpi=pmi2/pmix: PMI_RANK, PMI_SIZE, PMIX_RANK, with SLURM_{PROCID,
/// NTASKS,LOCALID}), torchrun's RANK, WORLD_SIZE, LOCAL_RANK; world size 1
/// when none is set. An error for values that contradict each other.
Status worldFromEnvironment(World &world);

/// The host side of the collectives: MPI's communicator over every rank.
/// With a world of size 1 every call is a no-op on the values given.
class HostCollectives {
public:
  /// Joins the run (MPI_Init) when the world has more than one rank; the
  /// ranks MPI reports must be those of the environment.
  Status init(const World &world);
  /// Leaves the run (MPI_Finalize) if init joined it.
  ~HostCollectives();

  /// Sums \p n doubles over the ranks, in place, the same on every rank.
  Status sum(double *values, int n);
  /// Sums \p n floats held in host memory over the ranks, in place (the
  /// cpu target's gradients), each rank's first multiplied by \p preMul.
  Status sumFloats(float *values, int64_t n, double preMul);
  /// ZeRO-1's reduction: \p values holds size x \p perRank floats; each
  /// rank's are multiplied by \p preMul, and the sums of part r (elements
  /// [r perRank, (r + 1) perRank)) land in rank r's part of its \p values
  /// (the other parts are left as they were).
  Status reduceScatterFloats(float *values, int64_t perRank, double preMul);
  /// ZeRO-1's gather, in place: \p base holds size parts of \p perRank
  /// bytes; every rank's part r becomes rank r's.
  Status allGatherBytes(void *base, int64_t perRank);
  /// Starts summing \p n floats over the ranks in place, without waiting
  /// (MPI_Iallreduce): they may be read only after waitSums(). Each call
  /// also lets the sums already started progress.
  Status startSum(float *values, int64_t n);
  /// Waits for every sum startSum started.
  Status waitSums();
  /// Copies \p bytes from rank 0 to every rank.
  Status broadcast(void *bytes, int64_t n);
  /// Ends every rank of the run with \p code (after this rank's error).
  [[noreturn]] void abortAll(int code);
  bool joined() const { return joined_; }
  const World &world() const { return world_; }

  /// Ends this process, with one line on stderr, when a wait for the other
  /// ranks (a Waiting in scope: MPI_Init, a collective) lasts longer than
  /// \p seconds (0: never), so that a rank that died or hangs cannot keep
  /// the others waiting; the launcher (mpirun, srun) then ends the rest of
  /// the run. Set before init, which starts the watch on more than one
  /// rank.
  void setTimeout(double seconds) { timeoutSeconds_ = seconds; }

  /// Marks a wait for the other ranks (\p what names it in the timeout's
  /// line) for as long as it is in scope; nested waits count as the
  /// outermost.
  class Waiting {
  public:
    Waiting(HostCollectives &host, const char *what);
    ~Waiting();
    Waiting(const Waiting &) = delete;
    Waiting &operator=(const Waiting &) = delete;

  private:
    HostCollectives &host_;
    bool outer_;
  };

private:
  void startWatch();

  World world_;
  bool joined_ = false;
  /// The requests of the sums startSum started (MPI_Request handles).
  std::vector<void *> pending_;
  double timeoutSeconds_ = 0;
  /// Since when (steady-clock milliseconds, 0: not waiting) and for what
  /// the outermost Waiting waits.
  std::atomic<int64_t> waitingSinceMs_{0};
  std::atomic<const char *> waitingFor_{nullptr};
  bool watching_ = false;
};

/// The process's collectives, set up by otcrt_main.
HostCollectives &hostCollectives();

} // namespace otcrt

#endif // OTCRT_WORLD_H
