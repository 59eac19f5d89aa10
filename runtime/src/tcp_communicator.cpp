// The TCP transport of the host collectives (communicator.h), for ranks that
// no MPI launched (torchrun --no-python, srun without PMI). Rendezvous: rank
// 0 listens on the rendezvous port (World::masterPort) on every interface,
// each other rank connects to MASTER_ADDR there, retrying until the
// timeout, and says which rank of how many it is; rank 0 checks the ranks
// agree (the same world size, each rank once) and answers each. The
// collectives then run as a star through rank 0: every rank sends its part
// up, rank 0 sums in rank order (rank 0's values, then rank 1's added, ...)
// or gathers, and sends the result down, so every rank gets the same bytes.
// Each message starts with a header naming its collective and size, which
// the receiver checks: ranks that call different collectives stop with a
// line naming both. startSum's sums run on a thread of the communicator's,
// one after another in the order started; every other collective first
// waits for them, so the sockets carry one collective at a time.
#include "communicator.h"
#include "world.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace otcrt {
namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Milliseconds left until \p deadline (-1: none) for poll(), at most
/// \p cap: -1 when there is no deadline and no cap, 0 when it has passed.
int pollMs(int64_t deadline, int cap = -1) {
  if (deadline < 0)
    return cap;
  int64_t left = std::max<int64_t>(0, deadline - nowMs());
  if (cap >= 0)
    left = std::min<int64_t>(left, cap);
  return static_cast<int>(left);
}

std::string errnoText(int err) { return std::strerror(err); }

/// "Otc1": the first word of every message and of the rendezvous's.
constexpr uint32_t kMagic = 0x3163744f;
/// The rendezvous: what a rank sends rank 0, and rank 0's answer.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  int32_t pad = 0;
};
enum Answer : int32_t { kWelcome = 0, kOtherSize = 1, kRankTaken = 2 };
struct Reply {
  uint32_t magic;
  int32_t answer;
  int32_t size;
  int32_t pad = 0;
};

/// The collectives, named in each message's header.
enum Op : uint32_t {
  kSumDoubles = 1,
  kSumFloats = 2,
  kReduceScatter = 3,
  kAllGather = 4,
  kBroadcast = 5
};
const char *opName(uint32_t op) {
  switch (op) {
  case kSumDoubles:
    return "the sum of doubles";
  case kSumFloats:
    return "the sum of floats";
  case kReduceScatter:
    return "the reduce-scatter";
  case kAllGather:
    return "the all-gather";
  case kBroadcast:
    return "the broadcast";
  }
  return "an unknown collective";
}
struct Header {
  uint32_t magic;
  uint32_t op;
  int64_t bytes;
};

/// Floats or doubles added in one piece as they arrive.
constexpr int64_t kPieceBytes = int64_t(1) << 20;

void closeFd(int &fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

void noDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool setBlocking(int fd, bool blocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0)
    return false;
  flags = blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK;
  return fcntl(fd, F_SETFL, flags) == 0;
}

/// Waits until \p fd is readable (or writable with \p out) or \p deadline
/// (-1: none) passes: false then.
bool waitFor(int fd, int64_t deadline, bool out = false) {
  for (;;) {
    pollfd p{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    int n = ::poll(&p, 1, pollMs(deadline));
    if (n > 0)
      return true;
    if (n == 0)
      return false;
    if (errno != EINTR)
      return true; // the read or write says what is wrong
  }
}

class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(HostCollectives &host, const World &world)
      : host_(host), world_(world),
        peers_(static_cast<size_t>(world.isRoot() ? world.size : 1), -1) {}

  ~TcpCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) {
      // A sum still running ends at its sockets' shutdown.
      for (int fd : peers_)
        if (fd >= 0)
          ::shutdown(fd, SHUT_RDWR);
      worker_.join();
    }
    for (int &fd : peers_)
      closeFd(fd);
  }

  const char *transport() const override { return "TCP"; }

  /// The rendezvous, within \p timeout seconds (0: no limit).
  Status join(double timeout) {
    const int64_t deadline =
        timeout > 0 ? nowMs() + static_cast<int64_t>(timeout * 1e3) : -1;
    return world_.isRoot() ? gather(deadline, timeout)
                           : connectToRoot(deadline, timeout);
  }

  Status sum(double *values, int n) override {
    HostCollectives::Waiting wait(host_, "the TCP all-reduce");
    if (Status s = drain(); !s)
      return s;
    return sumOf(kSumDoubles, values, n);
  }

  Status sumFloats(float *values, int64_t n) override {
    HostCollectives::Waiting wait(host_, "the TCP all-reduce");
    if (Status s = drain(); !s)
      return s;
    return sumOf(kSumFloats, values, n);
  }

  Status reduceScatterFloats(float *values, int64_t perRank,
                             double preMul) override {
    HostCollectives::Waiting wait(host_, "the TCP reduce-scatter");
    if (Status s = drain(); !s)
      return s;
    const int64_t total = world_.size * perRank;
    const int64_t bytes = total * 4, partBytes = perRank * 4;
    const float f = static_cast<float>(preMul);
    const bool scale = preMul != 1.0;
    if (!world_.isRoot()) {
      // Every part, each value multiplied, up; this rank's sums down.
      const int fd = peers_[0];
      if (Status s = sendHeader(fd, 0, kReduceScatter, bytes); !s)
        return s;
      std::vector<float> piece;
      const int64_t step = kPieceBytes / 4;
      for (int64_t at = 0; at < total; at += step) {
        const int64_t count = std::min(step, total - at);
        const float *from = values + at;
        if (scale) {
          piece.resize(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i)
            piece[i] = from[i] * f;
          from = piece.data();
        }
        if (Status s = sendBytes(fd, 0, from, count * 4); !s)
          return s;
      }
      return receive(fd, 0, kReduceScatter, values + world_.rank * perRank,
                     partBytes);
    }
    // Rank 0: the sums of every part, in rank order, in a buffer of their
    // own (this rank's other parts stay as they were).
    std::vector<float> sums(values, values + total);
    if (scale)
      for (float &v : sums)
        v *= f;
    if (Status s = addFromRanks(kReduceScatter, sums.data(), total); !s)
      return s;
    for (int r = 1; r < world_.size; ++r)
      if (Status s = sendMessage(peers_[r], r, kReduceScatter,
                                 sums.data() + r * perRank, partBytes);
          !s)
        return s;
    std::copy(sums.begin(), sums.begin() + perRank, values);
    return Status::ok();
  }

  Status allGatherBytes(void *base, int64_t perRank) override {
    HostCollectives::Waiting wait(host_, "the TCP all-gather");
    if (Status s = drain(); !s)
      return s;
    char *p = static_cast<char *>(base);
    const int64_t whole = world_.size * perRank;
    if (!world_.isRoot()) {
      if (Status s = sendMessage(peers_[0], 0, kAllGather,
                                 p + world_.rank * perRank, perRank);
          !s)
        return s;
      return receive(peers_[0], 0, kAllGather, p, whole);
    }
    for (int r = 1; r < world_.size; ++r)
      if (Status s =
              receive(peers_[r], r, kAllGather, p + r * perRank, perRank);
          !s)
        return s;
    for (int r = 1; r < world_.size; ++r)
      if (Status s = sendMessage(peers_[r], r, kAllGather, p, whole); !s)
        return s;
    return Status::ok();
  }

  Status broadcast(void *bytes, int64_t n) override {
    HostCollectives::Waiting wait(host_, "the TCP broadcast");
    if (Status s = drain(); !s)
      return s;
    if (!world_.isRoot())
      return receive(peers_[0], 0, kBroadcast, bytes, n);
    for (int r = 1; r < world_.size; ++r)
      if (Status s = sendMessage(peers_[r], r, kBroadcast, bytes, n); !s)
        return s;
    return Status::ok();
  }

  Status startSum(float *values, int64_t n) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!workerStatus_)
      return workerStatus_;
    jobs_.push_back({values, n});
    if (!worker_.joinable())
      worker_ = std::thread([this] { work(); });
    cv_.notify_all();
    return Status::ok();
  }

  Status waitSums() override {
    HostCollectives::Waiting wait(host_,
                                  "the TCP sums of the gradient buckets");
    return drain();
  }

  void abortAll(int code) override {
    // The others find this rank's connections closed at their next
    // collective (the launcher may end them first).
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }

private:
  /// Who is at the other end of peer \p r's socket, for messages.
  std::string who(int r) const {
    if (r == 0 && !world_.isRoot())
      return "rank 0 at " + world_.masterAddr + ":" +
             std::to_string(world_.masterPort);
    return "rank " + std::to_string(r);
  }

  Status lost(int r, const char *doing, int err) const {
    if (err == 0)
      return Status::error("lost " + who(r) + " while " + doing +
                           ": it closed its connection (it stopped: see its "
                           "error)");
    return Status::error("lost " + who(r) + " while " + doing + ": " +
                         errnoText(err));
  }

  Status sendBytes(int fd, int r, const void *data, int64_t bytes) {
    const char *p = static_cast<const char *>(data);
    while (bytes > 0) {
      ssize_t n = ::send(
          fd, p,
          static_cast<size_t>(std::min<int64_t>(bytes, int64_t(1) << 30)),
          MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return lost(r, "sending to it", n < 0 ? errno : 0);
      p += n;
      bytes -= n;
    }
    return Status::ok();
  }

  Status recvBytes(int fd, int r, void *data, int64_t bytes) {
    char *p = static_cast<char *>(data);
    while (bytes > 0) {
      ssize_t n = ::recv(
          fd, p,
          static_cast<size_t>(std::min<int64_t>(bytes, int64_t(1) << 30)), 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return lost(r, "receiving from it", n < 0 ? errno : 0);
      p += n;
      bytes -= n;
    }
    return Status::ok();
  }

  Status sendHeader(int fd, int r, Op op, int64_t bytes) {
    Header h{kMagic, op, bytes};
    return sendBytes(fd, r, &h, sizeof(h));
  }

  /// Reads a header from peer \p r and checks it announces \p op of
  /// \p bytes bytes.
  Status receiveHeader(int fd, int r, Op op, int64_t bytes) {
    Header h{};
    if (Status s = recvBytes(fd, r, &h, sizeof(h)); !s)
      return s;
    if (h.magic != kMagic)
      return Status::error(who(r) + " sent something that is not a message "
                                    "of this runtime's collectives");
    if (h.op != op || h.bytes != bytes)
      return Status::error(
          who(r) + " called " + opName(h.op) + " of " +
          std::to_string(h.bytes) + " bytes where rank " +
          std::to_string(world_.rank) + " called " + opName(op) + " of " +
          std::to_string(bytes) +
          " bytes: the ranks run different programs or options");
    return Status::ok();
  }

  Status sendMessage(int fd, int r, Op op, const void *data, int64_t bytes) {
    if (Status s = sendHeader(fd, r, op, bytes); !s)
      return s;
    return sendBytes(fd, r, data, bytes);
  }

  Status receive(int fd, int r, Op op, void *data, int64_t bytes) {
    if (Status s = receiveHeader(fd, r, op, bytes); !s)
      return s;
    return recvBytes(fd, r, data, bytes);
  }

  /// Rank 0: adds every other rank's \p n values of \p op to \p acc, in
  /// rank order, a piece at a time as they arrive.
  template <typename T> Status addFromRanks(Op op, T *acc, int64_t n) {
    std::vector<T> piece;
    const int64_t step = kPieceBytes / static_cast<int64_t>(sizeof(T));
    for (int r = 1; r < world_.size; ++r) {
      const int fd = peers_[r];
      if (Status s = receiveHeader(fd, r, op, n * sizeof(T)); !s)
        return s;
      for (int64_t at = 0; at < n; at += step) {
        const int64_t count = std::min(step, n - at);
        piece.resize(static_cast<size_t>(count));
        if (Status s = recvBytes(fd, r, piece.data(), count * sizeof(T)); !s)
          return s;
        T *to = acc + at;
        for (int64_t i = 0; i < count; ++i)
          to[i] += piece[i];
      }
    }
    return Status::ok();
  }

  /// The all-reduce: up to rank 0, which sums in rank order, and down.
  template <typename T> Status sumOf(Op op, T *values, int64_t n) {
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    if (!world_.isRoot()) {
      if (Status s = sendMessage(peers_[0], 0, op, values, bytes); !s)
        return s;
      return receive(peers_[0], 0, op, values, bytes);
    }
    if (Status s = addFromRanks(op, values, n); !s)
      return s;
    for (int r = 1; r < world_.size; ++r)
      if (Status s = sendMessage(peers_[r], r, op, values, bytes); !s)
        return s;
    return Status::ok();
  }

  /// The sums startSum queued, one after another.
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_)
        return;
      Job job = jobs_.front();
      busy_ = true;
      const bool failed = !workerStatus_;
      lock.unlock();
      Status s = failed ? Status::ok() : sumOf(kSumFloats, job.values, job.n);
      lock.lock();
      jobs_.pop_front();
      busy_ = false;
      if (!s && workerStatus_)
        workerStatus_ = s;
      cv_.notify_all();
    }
  }

  /// Waits for the sums startSum queued; their first failure.
  Status drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return jobs_.empty() && !busy_; });
    return workerStatus_;
  }

  /// The address to listen on: every interface, IPv6 with IPv4 mapped
  /// where there is IPv6, else IPv4.
  Status listen(int &listener) {
    const std::string where = "port " + std::to_string(world_.masterPort) +
                              " (" + world_.portSource + ")";
    int err = 0;
    for (int family : {AF_INET6, AF_INET}) {
      int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        err = errno;
        continue;
      }
      int one = 1, zero = 0;
      (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      sockaddr_storage addr{};
      socklen_t len = 0;
      if (family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        auto *a = reinterpret_cast<sockaddr_in6 *>(&addr);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons(static_cast<uint16_t>(world_.masterPort));
        len = sizeof(*a);
      } else {
        auto *a = reinterpret_cast<sockaddr_in *>(&addr);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons(static_cast<uint16_t>(world_.masterPort));
        len = sizeof(*a);
      }
      if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), len) == 0 &&
          ::listen(fd, world_.size) == 0) {
        listener = fd;
        return Status::ok();
      }
      err = errno;
      ::close(fd);
      // A port in use is in use for IPv4 too.
      if (err == EADDRINUSE || err == EACCES)
        break;
    }
    return Status::error("cannot listen for the other ranks on " + where +
                         ": " + errnoText(err) +
                         (err == EADDRINUSE
                              ? " (another process holds it: pick a free "
                                "port, or set OTC_RENDEZVOUS_PORT)"
                              : ""));
  }

  /// Rank 0: takes every other rank's connection, then welcomes them all.
  Status gather(int64_t deadline, double timeout) {
    int listener = -1;
    if (Status s = listen(listener); !s)
      return s;
    struct Closer {
      int &fd;
      ~Closer() { closeFd(fd); }
    } closer{listener};
    int joined = 1;
    while (joined < world_.size) {
      if (!waitFor(listener, deadline)) {
        std::string missing;
        int count = 0;
        for (int r = 1; r < world_.size; ++r)
          if (peers_[r] < 0) {
            if (count < 8)
              missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            ++count;
          }
        if (count > 8)
          missing += ", ...";
        char seconds[32];
        std::snprintf(seconds, sizeof(seconds), "%.0f", timeout);
        return Status::error(
            std::string("waited ") + seconds + " s for rank" +
            (count > 1 ? "s " : " ") + missing + " of " +
            std::to_string(world_.size) + " to connect to port " +
            std::to_string(world_.masterPort) + " (" + world_.portSource +
            "): are they started, with MASTER_ADDR naming this host? "
            "(--collective-timeout)");
      }
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
          continue;
        return Status::error("accepting the other ranks on port " +
                             std::to_string(world_.masterPort) +
                             " failed: " + errnoText(errno));
      }
      noDelay(fd);
      // A rank says who it is at once; a connection that does not (within
      // 10 s) is not a rank of this run and is dropped.
      Hello hello{};
      const int64_t helloBy = pollMs(deadline) < 0
                                  ? nowMs() + 10000
                                  : nowMs() + pollMs(deadline, 10000);
      if (!waitFor(fd, helloBy) ||
          ::recv(fd, &hello, sizeof(hello), MSG_WAITALL) !=
              static_cast<ssize_t>(sizeof(hello)) ||
          hello.magic != kMagic) {
        ::close(fd);
        continue;
      }
      Reply no{kMagic, kWelcome, world_.size};
      std::string why;
      if (hello.size != world_.size) {
        no.answer = kOtherSize;
        why = "a rank connected as rank " + std::to_string(hello.rank) +
              " of " + std::to_string(hello.size) + ", but this run has " +
              std::to_string(world_.size) +
              " ranks: the ranks' WORLD_SIZE differ";
      } else if (hello.rank <= 0 || hello.rank >= world_.size ||
                 peers_[hello.rank] >= 0) {
        no.answer = kRankTaken;
        why = "two processes were started as rank " +
              std::to_string(hello.rank) + " of " +
              std::to_string(world_.size) + ": each rank's RANK must differ";
      }
      if (!why.empty()) {
        (void)::send(fd, &no, sizeof(no), MSG_NOSIGNAL);
        ::close(fd);
        return Status::error(why);
      }
      peers_[hello.rank] = fd;
      ++joined;
    }
    const Reply welcome{kMagic, kWelcome, world_.size};
    for (int r = 1; r < world_.size; ++r)
      if (Status s = sendBytes(peers_[r], r, &welcome, sizeof(welcome)); !s)
        return s;
    return Status::ok();
  }

  /// Another rank: connects to rank 0, retrying until \p deadline, says
  /// who it is and waits for rank 0's welcome.
  Status connectToRoot(int64_t deadline, double timeout) {
    const std::string at = world_.masterAddr + ":" +
                           std::to_string(world_.masterPort) +
                           " (MASTER_ADDR, " + world_.portSource + ")";
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.0f", timeout);
    std::string last = "no answer";
    int fd = -1;
    int64_t pause = 50;
    while (fd < 0) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo *found = nullptr;
      const std::string port = std::to_string(world_.masterPort);
      int rc = ::getaddrinfo(world_.masterAddr.c_str(), port.c_str(), &hints,
                             &found);
      if (rc != 0 && rc != EAI_AGAIN)
        return Status::error("cannot resolve MASTER_ADDR='" +
                             world_.masterAddr + "': " + gai_strerror(rc));
      if (rc == EAI_AGAIN)
        last = gai_strerror(rc);
      for (addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                         a->ai_protocol);
        if (s < 0) {
          last = errnoText(errno);
          continue;
        }
        setBlocking(s, false);
        int err = 0;
        if (::connect(s, a->ai_addr, a->ai_addrlen) != 0) {
          err = errno;
          if (err == EINPROGRESS) {
            // An unreachable host answers nothing: a try ends after 2 s.
            const int64_t tryBy = deadline < 0
                                      ? nowMs() + 2000
                                      : nowMs() + pollMs(deadline, 2000);
            if (!waitFor(s, tryBy, true)) {
              err = ETIMEDOUT;
            } else {
              socklen_t len = sizeof(err);
              if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno;
            }
          }
        }
        if (err == 0 && setBlocking(s, true)) {
          fd = s;
        } else {
          last = errnoText(err);
          ::close(s);
        }
      }
      if (found)
        freeaddrinfo(found);
      if (fd >= 0)
        break;
      if (deadline >= 0 && nowMs() >= deadline)
        return Status::error("cannot reach rank 0 at " + at + " within " +
                             seconds + " s: " + last +
                             " (is rank 0 started, and MASTER_ADDR its "
                             "host? --collective-timeout)");
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min<int64_t>(pause, pollMs(deadline, 1000))));
      pause = std::min<int64_t>(pause * 2, 1000);
    }
    peers_[0] = fd;
    noDelay(fd);
    const Hello hello{kMagic, world_.rank, world_.size};
    if (Status s = sendBytes(fd, 0, &hello, sizeof(hello)); !s)
      return s;
    Reply reply{};
    if (!waitFor(fd, deadline))
      return Status::error("waited " + std::string(seconds) +
                           " s for rank 0 at " + at +
                           " to hear from every rank: one of them is not "
                           "started (--collective-timeout)");
    ssize_t n = ::recv(fd, &reply, sizeof(reply), MSG_WAITALL);
    if (n == 0)
      return Status::error("rank 0 at " + at +
                           " closed the connection during the rendezvous "
                           "(see its error)");
    if (n != static_cast<ssize_t>(sizeof(reply)) || reply.magic != kMagic)
      return Status::error("something other than rank 0 of this run answers "
                           "at " +
                           at);
    if (reply.answer == kOtherSize)
      return Status::error(
          "rank 0 at " + at + " runs " + std::to_string(reply.size) +
          " ranks, but this rank was started as rank " +
          std::to_string(world_.rank) + " of " + std::to_string(world_.size) +
          ": the ranks' WORLD_SIZE differ");
    if (reply.answer == kRankTaken)
      return Status::error("rank 0 at " + at + " already has a rank " +
                           std::to_string(world_.rank) +
                           ": each rank's RANK must differ");
    return Status::ok();
  }

  HostCollectives &host_;
  World world_;
  /// Rank 0: the socket of rank r at r (none at 0). Another rank: rank 0's.
  std::vector<int> peers_;

  /// startSum's sums, run by worker_ in order.
  struct Job {
    float *values;
    int64_t n;
  };
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool busy_ = false;
  bool stop_ = false;
  Status workerStatus_ = Status::ok();
};

} // namespace

std::unique_ptr<Communicator> tcpCommunicator(HostCollectives &host,
                                              const World &world,
                                              double timeout, Status &status) {
  auto communicator = std::make_unique<TcpCommunicator>(host, world);
  status = communicator->join(timeout);
  if (!status)
    return nullptr;
  return communicator;
}

} // namespace otcrt
