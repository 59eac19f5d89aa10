// The ranks of a data-parallel run from the launcher's environment (world.h)
// and the process's host collectives, which join the run through the
// transport the environment names (communicator.h: MPI or TCP) and hand
// every collective to it.
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

/// The value of \p name, or null when it is unset or empty.
const char *envText(const char *name) {
  const char *text = std::getenv(name);
  return text && *text ? text : nullptr;
}

/// Over TCP: rank 0's address and port from MASTER_ADDR and MASTER_PORT
/// (under torchrun, whose agent serves its own store on MASTER_PORT, the
/// port after it; OTC_RENDEZVOUS_PORT overrides either), an error when a
/// world of more than one rank lacks them.
Status tcpRendezvous(World &world) {
  const std::string who =
      world.launcher + " started " + std::to_string(world.size) + " ranks";
  const char *addr = envText("MASTER_ADDR");
  const char *port = envText("MASTER_PORT");
  const char *own = envText("OTC_RENDEZVOUS_PORT");
  const std::string hint =
      world.launcher == "srun"
          ? " (under srun: export MASTER_ADDR=$(scontrol show hostnames "
            "$SLURM_JOB_NODELIST | head -1) and MASTER_PORT=<a free port "
            "there> before srun)"
          : "";
  if (!addr)
    return Status::error(who +
                         ", but MASTER_ADDR is not set: the ranks meet "
                         "over TCP at rank 0's host, MASTER_ADDR, on "
                         "port MASTER_PORT" +
                         hint);
  if (!port && !own)
    return Status::error(who +
                         ", but MASTER_PORT is not set: the ranks meet "
                         "over TCP at MASTER_ADDR=" +
                         addr + " on port MASTER_PORT" + hint);
  const char *name = own ? "OTC_RENDEZVOUS_PORT" : "MASTER_PORT";
  const char *text = own ? own : port;
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(text, &end, 10);
  // Under torchrun the port after MASTER_PORT must be a port too.
  const long last = own ? 65535 : 65534;
  if (errno || *end || v < 1 || v > last)
    return Status::error(std::string(name) + "='" + text +
                         "' is not a port (1 to " + std::to_string(last) + ")");
  world.masterAddr = addr;
  world.masterPort = static_cast<int>(v);
  world.portSource = name;
  const char *agentStore = envText("TORCHELASTIC_USE_AGENT_STORE");
  if (!own && agentStore && std::strcmp(agentStore, "True") == 0) {
    world.masterPort += 1;
    world.portSource = "MASTER_PORT + 1: torchrun's agent serves MASTER_PORT";
  }
  return Status::ok();
}

} // namespace

Status worldFromEnvironment(World &world) {
  world = World{};
  std::string bad;
  using Transport = World::Transport;
  struct Source {
    const char *launcher, *rank, *size, *local;
    Transport transport;
    /// Set: the source applies only where this variable is set.
    const char *only;
  };
  // torchrun's variables come before Slurm's where torchrun started this
  // process (srun starting one torchrun a node): it is the nearer launcher.
  // srun with PMI talks through MPI unless MASTER_ADDR asks for TCP.
  const bool masterAddr = envText("MASTER_ADDR") != nullptr;
  const Transport pmi = masterAddr ? Transport::Tcp : Transport::Mpi;
  const Source sources[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK", Transport::Mpi, nullptr},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", Transport::Tcp,
       "TORCHELASTIC_RUN_ID"},
      {"srun", "PMIX_RANK", "SLURM_NTASKS", "SLURM_LOCALID", pmi, nullptr},
      {"srun", "PMI_RANK", "PMI_SIZE", "SLURM_LOCALID", pmi, nullptr},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", Transport::Tcp,
       nullptr},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", Transport::Tcp, nullptr},
  };
  for (const Source &s : sources) {
    if (s.only && !envText(s.only))
      continue;
    int rank = 0, size = 0, local = 0;
    const bool hasRank = envInt(s.rank, rank, bad);
    const bool hasSize = envInt(s.size, size, bad);
    if (!hasRank || !hasSize) {
      // torchrun's pair is its own: one without the other is a mistake.
      if (!s.only && std::strcmp(s.rank, "RANK") == 0 && bad.empty() &&
          hasRank != hasSize)
        return Status::error(std::string(hasRank ? "RANK" : "WORLD_SIZE") +
                             " is set but " +
                             (hasRank ? "WORLD_SIZE" : "RANK") +
                             " is not: set both, or neither to run alone");
      continue;
    }
    if (!envInt(s.local, local, bad))
      local = rank;
    if (size < 1 || rank >= size)
      return Status::error(std::string(s.rank) + "=" + std::to_string(rank) +
                           " does not lie below " + s.size + "=" +
                           std::to_string(size));
    if (local >= size)
      return Status::error(std::string(s.local) + "=" + std::to_string(local) +
                           " does not lie below " + s.size + "=" +
                           std::to_string(size));
    world.rank = rank;
    world.size = size;
    world.localRank = local;
    world.launcher = s.launcher;
    if (size > 1) {
      world.transport = s.transport;
      if (s.transport == Transport::Tcp)
        if (Status st = tcpRendezvous(world); !st)
          return st;
    }
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

HostCollectives::HostCollectives() = default;

Status HostCollectives::init(const World &world) {
  world_ = world;
  if (world.size == 1)
    return Status::ok();
  Status s = Status::ok();
  if (world.transport == World::Transport::Tcp) {
    // The rendezvous keeps its own deadline, with its own line.
    communicator_ = tcpCommunicator(*this, world, timeoutSeconds_, s);
    startWatch();
    return s;
  }
  startWatch();
  communicator_ = mpiCommunicator(*this, world, s);
  return s;
}

void HostCollectives::join(const World &world,
                           std::unique_ptr<Communicator> communicator) {
  world_ = world;
  communicator_ = std::move(communicator);
}

HostCollectives::~HostCollectives() = default;

Status HostCollectives::sum(double *values, int n) {
  if (!communicator_)
    return Status::ok();
  return communicator_->sum(values, n);
}

Status HostCollectives::sumFloats(float *values, int64_t n, double preMul) {
  if (preMul != 1.0) {
    const float f = static_cast<float>(preMul);
    for (int64_t i = 0; i < n; ++i)
      values[i] *= f;
  }
  if (!communicator_)
    return Status::ok();
  return communicator_->sumFloats(values, n);
}

/// A sharded optimizer's collective called outside a data-parallel run.
static Status notInARun() {
  return Status::error("a sharded optimizer needs the ranks of a "
                       "data-parallel run (mpirun, torchrun, srun)");
}

Status HostCollectives::reduceScatterFloats(float *values, int64_t perRank,
                                            double preMul) {
  if (!communicator_)
    return notInARun();
  return communicator_->reduceScatterFloats(values, perRank, preMul);
}

Status HostCollectives::allGatherBytes(void *base, int64_t perRank) {
  if (!communicator_)
    return notInARun();
  return communicator_->allGatherBytes(base, perRank);
}

Status HostCollectives::startSum(float *values, int64_t n) {
  if (!communicator_)
    return Status::ok();
  return communicator_->startSum(values, n);
}

Status HostCollectives::waitSums() {
  if (!communicator_)
    return Status::ok();
  return communicator_->waitSums();
}

Status HostCollectives::broadcast(void *bytes, int64_t n) {
  if (!communicator_)
    return Status::ok();
  return communicator_->broadcast(bytes, n);
}

void HostCollectives::abortAll(int code) {
  if (communicator_)
    communicator_->abortAll(code);
  std::exit(code);
}

HostCollectives &hostCollectives() {
  static HostCollectives collectives;
  return collectives;
}

} // namespace otcrt

extern "C" int otcrt_rank(void) {
  return otcrt::hostCollectives().world().rank;
}
