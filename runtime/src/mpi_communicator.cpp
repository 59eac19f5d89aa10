// The MPI transport of the host collectives (communicator.h): Open MPI's
// library, loaded when a run started by mpirun (or srun --mpi=pmix) has more
// than one rank, and its collectives over MPI_COMM_WORLD.
#include "communicator.h"
#include "world.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef OTCRT_HAVE_MPI
// Types and constants only: the library is loaded at run time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "dynamic_library.h"

#include <mpi.h>
#endif

namespace otcrt {

#ifdef OTCRT_HAVE_MPI
namespace {

/// Open MPI's library, loaded when a run has more than one rank: a program
/// links no MPI and runs alone without one installed. Its predefined
/// handles are the addresses of its global objects (Open MPI's ABI).
struct MpiLibrary {
  DynamicLibrary library;
  decltype(&MPI_Init) init = nullptr;
  decltype(&MPI_Initialized) initialized = nullptr;
  decltype(&MPI_Finalize) finalize = nullptr;
  decltype(&MPI_Finalized) finalized = nullptr;
  decltype(&MPI_Comm_rank) commRank = nullptr;
  decltype(&MPI_Comm_size) commSize = nullptr;
  decltype(&MPI_Comm_set_errhandler) setErrhandler = nullptr;
  decltype(&MPI_Allreduce) allreduce = nullptr;
  decltype(&MPI_Bcast) bcast = nullptr;
  decltype(&MPI_Reduce_scatter_block) reduceScatterBlock = nullptr;
  decltype(&MPI_Allgather) allgather = nullptr;
  decltype(&MPI_Iallreduce) iallreduce = nullptr;
  decltype(&MPI_Testall) testall = nullptr;
  decltype(&MPI_Waitall) waitall = nullptr;
  decltype(&MPI_Abort) abort = nullptr;
  decltype(&MPI_Error_string) errorString = nullptr;
  MPI_Comm world = nullptr;
  MPI_Datatype dbl = nullptr, flt = nullptr, byte = nullptr;
  MPI_Op sum = nullptr;
  MPI_Errhandler errorsReturn = nullptr;

  /// Loads it; false with \p why when it cannot be.
  bool load(std::string &why) {
    if (!library.open({"libmpi.so.40", "libmpi.so"}, why)) {
      why = "cannot load Open MPI's libmpi.so.40 (" + why +
            "): install Open MPI (Debian: openmpi-bin)";
      return false;
    }
    DynamicLibrary &l = library;
    bool ok =
        l.bind(init, "MPI_Init") && l.bind(initialized, "MPI_Initialized") &&
        l.bind(finalize, "MPI_Finalize") &&
        l.bind(finalized, "MPI_Finalized") &&
        l.bind(commRank, "MPI_Comm_rank") &&
        l.bind(commSize, "MPI_Comm_size") &&
        l.bind(setErrhandler, "MPI_Comm_set_errhandler") &&
        l.bind(allreduce, "MPI_Allreduce") && l.bind(bcast, "MPI_Bcast") &&
        l.bind(reduceScatterBlock, "MPI_Reduce_scatter_block") &&
        l.bind(allgather, "MPI_Allgather") &&
        l.bind(iallreduce, "MPI_Iallreduce") &&
        l.bind(testall, "MPI_Testall") && l.bind(waitall, "MPI_Waitall") &&
        l.bind(abort, "MPI_Abort") && l.bind(errorString, "MPI_Error_string") &&
        l.bind(world, "ompi_mpi_comm_world") &&
        l.bind(dbl, "ompi_mpi_double") && l.bind(flt, "ompi_mpi_float") &&
        l.bind(byte, "ompi_mpi_byte") && l.bind(sum, "ompi_mpi_op_sum") &&
        l.bind(errorsReturn, "ompi_mpi_errors_return");
    if (!ok)
      why = "the MPI library loaded is not Open MPI's (a symbol is missing)";
    return ok;
  }
};

MpiLibrary &mpi() {
  static MpiLibrary library;
  return library;
}

/// Open MPI's MPI_IN_PLACE.
void *const kInPlace = reinterpret_cast<void *>(1);

Status mpiStatus(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  mpi().errorString(code, text, &len);
  return Status::error(std::string(what) +
                       " failed: " + std::string(text, len));
}

/// MPI counts are ints: large buffers go in pieces.
constexpr int64_t kMaxCount = int64_t(1) << 30;

} // namespace

namespace {

static_assert(sizeof(MPI_Request) == sizeof(void *),
              "MPI_Request is kept as a pointer");

/// Elements (floats or bytes) of one rank's part that one call of the
/// reduce-scatter and the all-gather moves: its parts are packed into a
/// buffer of size x this, since a part's pieces do not lie together in the
/// whole.
constexpr int64_t kPiece = int64_t(1) << 24;

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(HostCollectives &host, const World &world)
      : host_(host), world_(world) {}

  /// MPI_Init, unless the process has joined already; the ranks MPI sees
  /// must be the environment's.
  Status join() {
    MpiLibrary &m = mpi();
    int initialized = 0;
    m.initialized(&initialized);
    if (!initialized) {
      HostCollectives::Waiting wait(host_, "MPI_Init");
      if (Status s = mpiStatus(m.init(nullptr, nullptr), "MPI_Init"); !s)
        return s;
    }
    joined_ = true;
    m.setErrhandler(m.world, m.errorsReturn);
    int rank = 0, size = 0;
    m.commRank(m.world, &rank);
    m.commSize(m.world, &size);
    if (rank != world_.rank || size != world_.size)
      return Status::error(
          world_.launcher + " describes rank " + std::to_string(world_.rank) +
          " of " + std::to_string(world_.size) + ", but MPI sees rank " +
          std::to_string(rank) + " of " + std::to_string(size) +
          ": the ranks talk through MPI, so start them with mpirun -np " +
          std::to_string(world_.size) +
          " (or srun --mpi=pmix; or export MASTER_ADDR and MASTER_PORT for "
          "TCP)");
    return Status::ok();
  }

  /// Leaves the run (MPI_Finalize) if join joined it.
  ~MpiCommunicator() override {
    if (joined_) {
      int finalized = 0;
      mpi().finalized(&finalized);
      if (!finalized)
        mpi().finalize();
    }
  }

  const char *transport() const override { return "MPI"; }

  Status sum(double *values, int n) override {
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Allreduce");
    return mpiStatus(m.allreduce(kInPlace, values, n, m.dbl, m.sum, m.world),
                     "MPI_Allreduce");
  }

  Status sumFloats(float *values, int64_t n) override {
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Allreduce");
    for (int64_t at = 0; at < n; at += kMaxCount) {
      int count = static_cast<int>(std::min(kMaxCount, n - at));
      if (Status s = mpiStatus(
              m.allreduce(kInPlace, values + at, count, m.flt, m.sum, m.world),
              "MPI_Allreduce");
          !s)
        return s;
    }
    return Status::ok();
  }

  Status reduceScatterFloats(float *values, int64_t perRank,
                             double preMul) override {
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Reduce_scatter_block");
    const int64_t ranks = world_.size;
    const float f = static_cast<float>(preMul);
    std::vector<float> send, mine;
    for (int64_t at = 0; at < perRank; at += kPiece) {
      int64_t count = std::min(kPiece, perRank - at);
      send.resize(static_cast<size_t>(ranks * count));
      mine.resize(static_cast<size_t>(count));
      for (int64_t r = 0; r < ranks; ++r) {
        const float *from = values + r * perRank + at;
        float *to = send.data() + r * count;
        for (int64_t i = 0; i < count; ++i)
          to[i] = preMul != 1.0 ? from[i] * f : from[i];
      }
      if (Status s = mpiStatus(m.reduceScatterBlock(send.data(), mine.data(),
                                                    static_cast<int>(count),
                                                    m.flt, m.sum, m.world),
                               "MPI_Reduce_scatter_block");
          !s)
        return s;
      std::copy(mine.begin(), mine.end(), values + world_.rank * perRank + at);
    }
    return Status::ok();
  }

  Status allGatherBytes(void *base, int64_t perRank) override {
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Allgather");
    const int64_t ranks = world_.size;
    char *p = static_cast<char *>(base);
    std::vector<char> all;
    for (int64_t at = 0; at < perRank; at += kPiece) {
      int64_t count = std::min(kPiece, perRank - at);
      all.resize(static_cast<size_t>(ranks * count));
      if (Status s =
              mpiStatus(m.allgather(p + world_.rank * perRank + at,
                                    static_cast<int>(count), m.byte, all.data(),
                                    static_cast<int>(count), m.byte, m.world),
                        "MPI_Allgather");
          !s)
        return s;
      for (int64_t r = 0; r < ranks; ++r)
        std::memcpy(p + r * perRank + at, all.data() + r * count,
                    static_cast<size_t>(count));
    }
    return Status::ok();
  }

  Status startSum(float *values, int64_t n) override {
    MpiLibrary &m = mpi();
    for (int64_t at = 0; at < n; at += kMaxCount) {
      int count = static_cast<int>(std::min(kMaxCount, n - at));
      MPI_Request request;
      if (Status s = mpiStatus(m.iallreduce(kInPlace, values + at, count, m.flt,
                                            m.sum, m.world, &request),
                               "MPI_Iallreduce");
          !s)
        return s;
      pending_.push_back(request);
    }
    // Open MPI moves a non-blocking collective on inside MPI calls: each
    // start is one for those before it.
    int done = 0;
    return mpiStatus(m.testall(static_cast<int>(pending_.size()),
                               reinterpret_cast<MPI_Request *>(pending_.data()),
                               &done, MPI_STATUSES_IGNORE),
                     "MPI_Testall");
  }

  Status waitSums() override {
    if (pending_.empty())
      return Status::ok();
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Waitall");
    Status s =
        mpiStatus(m.waitall(static_cast<int>(pending_.size()),
                            reinterpret_cast<MPI_Request *>(pending_.data()),
                            MPI_STATUSES_IGNORE),
                  "MPI_Waitall");
    pending_.clear();
    return s;
  }

  Status broadcast(void *bytes, int64_t n) override {
    MpiLibrary &m = mpi();
    HostCollectives::Waiting wait(host_, "MPI_Bcast");
    char *p = static_cast<char *>(bytes);
    for (int64_t at = 0; at < n; at += kMaxCount) {
      int count = static_cast<int>(std::min(kMaxCount, n - at));
      if (Status s = mpiStatus(m.bcast(p + at, count, m.byte, 0, m.world),
                               "MPI_Bcast");
          !s)
        return s;
    }
    return Status::ok();
  }

  void abortAll(int code) override {
    if (joined_)
      mpi().abort(mpi().world, code);
    std::exit(code);
  }

private:
  HostCollectives &host_;
  World world_;
  bool joined_ = false;
  /// The requests of the sums startSum started (MPI_Request handles).
  std::vector<void *> pending_;
};

} // namespace

std::unique_ptr<Communicator>
mpiCommunicator(HostCollectives &host, const World &world, Status &status) {
  std::string why;
  if (!mpi().load(why)) {
    status = Status::error(world.launcher + " started " +
                           std::to_string(world.size) + " ranks, but " + why);
    return nullptr;
  }
  auto communicator = std::make_unique<MpiCommunicator>(host, world);
  status = communicator->join();
  // Joined, even when the ranks disagree: MPI_Abort ends them all.
  return communicator;
}

#else // !OTCRT_HAVE_MPI

std::unique_ptr<Communicator>
mpiCommunicator(HostCollectives &, const World &world, Status &status) {
  status =
      Status::error(world.launcher + " started " + std::to_string(world.size) +
                    " ranks, but this runtime was built without MPI "
                    "(install libopenmpi-dev and rebuild otc; or export "
                    "MASTER_ADDR and MASTER_PORT for TCP)");
  return nullptr;
}

#endif

} // namespace otcrt
