// The ranks of a data-parallel run and the process's host collectives
// between them. A `train` program started by mpirun, torchrun or srun is one
// rank of the run: it reads its part of every global batch, and the
// gradients of all ranks are summed before the optimizer step (each rank's
// pre-scaled by its share), so the step equals one process's gradient
// accumulation over the whole batch. The launcher's environment says where
// this process stands and how the ranks reach each other: through MPI
// (mpirun; srun --mpi=pmix) or over TCP from rank 0 at MASTER_ADDR
// (torchrun; srun with MASTER_ADDR and MASTER_PORT exported). The host
// collectives carry the host values (target counts, losses, flags) and, on
// the cpu target, the gradients, through the transport's Communicator
// (communicator.h); on the cuda target NCCL sums the gradients on the
// device, its id handed out through them. Started alone, a program is world
// size 1 and talks to no one.
#ifndef OTCRT_WORLD_H
#define OTCRT_WORLD_H

#include "communicator.h"
#include "otcrt/status.h"

#include <atomic>
#include <cstdint>
#include <memory>
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
  /// How the ranks reach each other (None alone).
  enum class Transport { None, Mpi, Tcp };
  Transport transport = Transport::None;
  /// TCP: rank 0's host (MASTER_ADDR), the port it listens on there, and
  /// what chose the port (MASTER_PORT; under torchrun, whose own agent
  /// serves MASTER_PORT, MASTER_PORT + 1; OTC_RENDEZVOUS_PORT overrides
  /// both), for messages.
  std::string masterAddr;
  int masterPort = 0;
  std::string portSource;
  bool isRoot() const { return rank == 0; }
};

/// The world as the launcher's environment variables describe it, the first
/// that applies: Open MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK} (MPI);
/// torchrun's RANK, WORLD_SIZE, LOCAL_RANK where torchrun started this
/// process (TORCHELASTIC_RUN_ID; TCP), also inside a Slurm step; PMI/PMIx's
/// (srun --mpi=pmi2/pmix: PMIX_RANK, PMI_RANK, PMI_SIZE with
/// SLURM_{NTASKS,LOCALID}; MPI, or TCP where MASTER_ADDR is set); Slurm's
/// SLURM_{PROCID,NTASKS,LOCALID} (TCP); RANK, WORLD_SIZE, LOCAL_RANK (TCP).
/// World size 1 when none is set. Over TCP, MASTER_ADDR and MASTER_PORT
/// are read too. An error, one line, for values that contradict each other
/// and for a TCP world of more than one rank without MASTER_ADDR or
/// MASTER_PORT.
Status worldFromEnvironment(World &world);

/// The host side of the collectives: the transport's communicator over
/// every rank (communicator.h), picked by init from the world. With a world
/// of size 1 every call is a no-op on the values given.
class HostCollectives {
public:
  HostCollectives();
  /// Joins the run when the world has more than one rank: through MPI
  /// (MPI_Init; the ranks MPI reports must be those of the environment) or
  /// over TCP (the rendezvous at rank 0).
  Status init(const World &world);
  /// Joins the run through \p communicator (tests).
  void join(const World &world, std::unique_ptr<Communicator> communicator);
  /// Leaves the run (MPI_Finalize, the sockets closed) if it was joined.
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
  /// (MPI_Iallreduce; over TCP a thread of the communicator's): they may be
  /// read only after waitSums().
  Status startSum(float *values, int64_t n);
  /// Waits for every sum startSum started.
  Status waitSums();
  /// Copies \p bytes from rank 0 to every rank.
  Status broadcast(void *bytes, int64_t n);
  /// Ends every rank of the run with \p code (after this rank's error).
  [[noreturn]] void abortAll(int code);
  bool joined() const { return communicator_ != nullptr; }
  const World &world() const { return world_; }
  /// The transport's name ("MPI", "TCP"), or "" alone.
  const char *transport() const {
    return communicator_ ? communicator_->transport() : "";
  }

  /// Ends this process, with one line on stderr, when a wait for the other
  /// ranks (a Waiting in scope: MPI_Init, a collective) lasts longer than
  /// \p seconds (0: never), so that a rank that died or hangs cannot keep
  /// the others waiting; the launcher (mpirun, torchrun, srun) then ends
  /// the rest of the run, or the others find this rank's connections
  /// closed. Set before init, which starts the watch on more than one
  /// rank. The TCP rendezvous in init has its own deadline, the same.
  void setTimeout(double seconds) { timeoutSeconds_ = seconds; }
  double timeout() const { return timeoutSeconds_; }

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
  std::unique_ptr<Communicator> communicator_;
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
