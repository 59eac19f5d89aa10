// The ranks of a data-parallel run from the launcher's environment, and
// MPI's collectives between them (world.h), Open MPI's library loaded when
// there is more than one rank.
#include "world.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#ifdef OTCRT_HAVE_MPI
// Types and constants only: the library is loaded at run time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "dynamic_library.h"

#include <mpi.h>
#endif

namespace otcrt {
namespace {

/// Reads the integer environment variable \p name into \p out: false when
/// it is unset; an error in \p bad when it is not a whole number >= 0.
bool envInt(const char *name, int &out, std::string &bad) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return false;
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno || *end || v < 0 || v > INT_MAX) {
    if (bad.empty())
      bad = std::string(name) + "='" + text + "' is not a rank or a count";
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

} // namespace

Status worldFromEnvironment(World &world) {
  world = World{};
  std::string bad;
  struct Source {
    const char *launcher, *rank, *size, *local;
  };
  // First match wins: mpirun's own variables, then a PMI launch (srun),
  // then torchrun's.
  const Source sources[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"srun", "PMI_RANK", "PMI_SIZE", "SLURM_LOCALID"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const Source &s : sources) {
    int rank = 0, size = 0, local = 0;
    if (!envInt(s.rank, rank, bad) || !envInt(s.size, size, bad))
      continue;
    if (!envInt(s.local, local, bad))
      local = rank;
    if (size < 1 || rank >= size)
      return Status::error(std::string(s.rank) + "=" + std::to_string(rank) +
                           " does not lie below " + s.size + "=" +
                           std::to_string(size));
    world.rank = rank;
    world.size = size;
    world.localRank = local;
    world.launcher = s.launcher;
    return Status::ok();
  }
  if (!bad.empty())
    return Status::error(bad);
  return Status::ok();
}

namespace {

int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

HostCollectives::Waiting::Waiting(HostCollectives &host, const char *what)
    : host_(host), outer_(host.waitingSinceMs_.load() == 0) {
  if (outer_) {
    host_.waitingFor_.store(what);
    host_.waitingSinceMs_.store(steadyMs());
  }
}

HostCollectives::Waiting::~Waiting() {
  if (outer_)
    host_.waitingSinceMs_.store(0);
}

void HostCollectives::startWatch() {
  if (watching_ || timeoutSeconds_ <= 0 || world_.size <= 1)
    return;
  watching_ = true;
  // A detached thread that looks twice a second; it uses no MPI (this
  // process joined with MPI_THREAD_SINGLE) and ends the process itself.
  std::thread([this] {
    const int64_t limitMs = static_cast<int64_t>(timeoutSeconds_ * 1e3);
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      int64_t since = waitingSinceMs_.load();
      if (since == 0 || steadyMs() - since <= limitMs)
        continue;
      const char *what = waitingFor_.load();
      std::fprintf(stderr,
                   "otc train: rank %d: error: waited %.0f s for the other "
                   "ranks in %s: one of them has stopped or hangs "
                   "(--collective-timeout)\n",
                   world_.rank, timeoutSeconds_, what ? what : "a collective");
      std::fflush(stderr);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }).detach();
}

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
        l.bind(iallreduce, "MPI_Iallreduce") && l.bind(testall, "MPI_Testall") &&
        l.bind(waitall, "MPI_Waitall") &&
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

Status HostCollectives::init(const World &world) {
  world_ = world;
  if (world.size == 1)
    return Status::ok();
  startWatch();
  std::string why;
  if (!mpi().load(why))
    return Status::error(world.launcher + " started " +
                         std::to_string(world.size) + " ranks, but " + why);
  MpiLibrary &m = mpi();
  int initialized = 0;
  m.initialized(&initialized);
  if (!initialized) {
    Waiting wait(*this, "MPI_Init");
    if (Status s = mpiStatus(m.init(nullptr, nullptr), "MPI_Init"); !s)
      return s;
  }
  joined_ = true;
  m.setErrhandler(m.world, m.errorsReturn);
  int rank = 0, size = 0;
  m.commRank(m.world, &rank);
  m.commSize(m.world, &size);
  if (rank != world.rank || size != world.size)
    return Status::error(
        world.launcher + " describes rank " + std::to_string(world.rank) +
        " of " + std::to_string(world.size) + ", but MPI sees rank " +
        std::to_string(rank) + " of " + std::to_string(size) +
        ": the ranks talk through MPI, so start them with mpirun -np " +
        std::to_string(world.size) + " (or srun --mpi=pmix)");
  return Status::ok();
}

HostCollectives::~HostCollectives() {
  if (joined_) {
    int finalized = 0;
    mpi().finalized(&finalized);
    if (!finalized)
      mpi().finalize();
  }
}

Status HostCollectives::sum(double *values, int n) {
  if (!joined_)
    return Status::ok();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Allreduce");
  return mpiStatus(m.allreduce(kInPlace, values, n, m.dbl, m.sum, m.world),
                   "MPI_Allreduce");
}

Status HostCollectives::sumFloats(float *values, int64_t n, double preMul) {
  if (preMul != 1.0) {
    const float f = static_cast<float>(preMul);
    for (int64_t i = 0; i < n; ++i)
      values[i] *= f;
  }
  if (!joined_)
    return Status::ok();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Allreduce");
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

/// A sharded optimizer's collective called outside a data-parallel run.
Status notInARun() {
  return Status::error("a sharded optimizer needs the ranks of a "
                       "data-parallel run (mpirun)");
}

/// Elements (floats or bytes) of one rank's part that one call of the
/// collectives below moves: its parts are packed into a buffer of size x
/// this, since a part's pieces do not lie together in the whole.
constexpr int64_t kPiece = int64_t(1) << 24;

Status HostCollectives::reduceScatterFloats(float *values, int64_t perRank,
                                            double preMul) {
  if (!joined_)
    return notInARun();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Reduce_scatter_block");
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

Status HostCollectives::allGatherBytes(void *base, int64_t perRank) {
  if (!joined_)
    return notInARun();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Allgather");
  const int64_t ranks = world_.size;
  char *p = static_cast<char *>(base);
  std::vector<char> all;
  for (int64_t at = 0; at < perRank; at += kPiece) {
    int64_t count = std::min(kPiece, perRank - at);
    all.resize(static_cast<size_t>(ranks * count));
    if (Status s = mpiStatus(
            m.allgather(p + world_.rank * perRank + at, static_cast<int>(count),
                        m.byte, all.data(), static_cast<int>(count), m.byte,
                        m.world),
            "MPI_Allgather");
        !s)
      return s;
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(p + r * perRank + at, all.data() + r * count,
                  static_cast<size_t>(count));
  }
  return Status::ok();
}

static_assert(sizeof(MPI_Request) == sizeof(void *),
              "MPI_Request is kept as a pointer");

Status HostCollectives::startSum(float *values, int64_t n) {
  if (!joined_)
    return Status::ok();
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

Status HostCollectives::waitSums() {
  if (!joined_ || pending_.empty())
    return Status::ok();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Waitall");
  Status s = mpiStatus(m.waitall(static_cast<int>(pending_.size()),
                                 reinterpret_cast<MPI_Request *>(pending_.data()),
                                 MPI_STATUSES_IGNORE),
                       "MPI_Waitall");
  pending_.clear();
  return s;
}

Status HostCollectives::broadcast(void *bytes, int64_t n) {
  if (!joined_)
    return Status::ok();
  MpiLibrary &m = mpi();
  Waiting wait(*this, "MPI_Bcast");
  char *p = static_cast<char *>(bytes);
  for (int64_t at = 0; at < n; at += kMaxCount) {
    int count = static_cast<int>(std::min(kMaxCount, n - at));
    if (Status s =
            mpiStatus(m.bcast(p + at, count, m.byte, 0, m.world), "MPI_Bcast");
        !s)
      return s;
  }
  return Status::ok();
}

void HostCollectives::abortAll(int code) {
  if (joined_)
    mpi().abort(mpi().world, code);
  std::exit(code);
}

#else // !OTCRT_HAVE_MPI

Status HostCollectives::init(const World &world) {
  world_ = world;
  if (world.size == 1)
    return Status::ok();
  return Status::error(world.launcher + " started " +
                       std::to_string(world.size) +
                       " ranks, but this runtime was built without MPI "
                       "(install libopenmpi-dev and rebuild otc)");
}

HostCollectives::~HostCollectives() = default;

Status HostCollectives::sum(double *, int) { return Status::ok(); }

Status HostCollectives::sumFloats(float *values, int64_t n, double preMul) {
  if (preMul != 1.0)
    for (int64_t i = 0; i < n; ++i)
      values[i] *= static_cast<float>(preMul);
  return Status::ok();
}

Status HostCollectives::reduceScatterFloats(float *, int64_t, double) {
  return Status::error("a sharded optimizer needs the ranks of a "
                       "data-parallel run, and this runtime was built without "
                       "MPI");
}

Status HostCollectives::allGatherBytes(void *, int64_t) {
  return Status::error("a sharded optimizer needs the ranks of a "
                       "data-parallel run, and this runtime was built without "
                       "MPI");
}

Status HostCollectives::startSum(float *, int64_t) { return Status::ok(); }

Status HostCollectives::waitSums() { return Status::ok(); }

Status HostCollectives::broadcast(void *, int64_t) { return Status::ok(); }

void HostCollectives::abortAll(int code) { std::exit(code); }

#endif

HostCollectives &hostCollectives() {
  static HostCollectives collectives;
  return collectives;
}

} // namespace otcrt

extern "C" int otcrt_rank(void) {
  return otcrt::hostCollectives().world().rank;
}
