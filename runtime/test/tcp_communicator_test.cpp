// Tests of the TCP transport of the host collectives (tcp_communicator.cpp)
// with each rank a thread of this process on 127.0.0.1: sums are the same
// bits on every rank and those of an independent sum in rank order, the
// reduce-scatter's and all-gather's parts land where ZeRO-1 reads them, the
// broadcast and the non-blocking sums; and each way a launch goes wrong (no
// MASTER_ADDR, a rank that never connects, no rank 0, a port in use, ranks
// that disagree, a rank that leaves, ranks in different collectives) is one
// line, within the timeout.
#include "src/world.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace otcrt;

namespace {

/// A port nothing listens on now (the kernel's pick, released).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

World tcpWorld(int rank, int size, int port) {
  World w;
  w.rank = rank;
  w.size = size;
  w.localRank = rank;
  w.launcher = "torchrun";
  w.transport = World::Transport::Tcp;
  w.masterAddr = "127.0.0.1";
  w.masterPort = port;
  w.portSource = "MASTER_PORT";
  return w;
}

/// Joins ranks \p ranks (of \p size) over TCP on one port, each on a thread
/// of its own, and runs \p body on each with its joined host collectives.
/// Returns each rank's rendezvous status.
std::vector<Status>
runRanks(int size, const std::vector<int> &ranks, double timeout,
         const std::function<void(int, HostCollectives &)> &body, int port = 0,
         std::vector<World> worlds = {}) {
  if (port == 0)
    port = freePort();
  std::vector<Status> joined(ranks.size(), Status::ok());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      World w = worlds.empty() ? tcpWorld(ranks[i], size, port) : worlds[i];
      HostCollectives host;
      Status s = Status::ok();
      std::unique_ptr<Communicator> c = tcpCommunicator(host, w, timeout, s);
      joined[i] = s;
      if (!c)
        return;
      host.join(w, std::move(c));
      body(w.rank, host);
    });
  for (std::thread &t : threads)
    t.join();
  return joined;
}

std::vector<int> allRanks(int size) {
  std::vector<int> r;
  for (int i = 0; i < size; ++i)
    r.push_back(i);
  return r;
}

/// Rank r's values: magnitudes from 1e-8 to 1e8, so that the order of the
/// sum shows in the last bits.
std::vector<float> valuesOf(int rank, size_t n) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<float> v(n);
  for (float &x : v)
    x = unit(gen) * std::pow(10.0f, static_cast<float>(exponent(gen)));
  return v;
}

bool oneLine(const Status &s) {
  return !s && !s.message().empty() &&
         s.message().find('\n') == std::string::npos;
}

TEST(TcpCommunicator, SumsAreTheSameBitsOnEveryRankInRankOrder) {
  for (int size : {2, 3}) {
    // More floats than one piece of rank 0's receive (1 MiB).
    const size_t n = 300001;
    const double preMul = 0.3;
    std::vector<std::vector<float>> got(size);
    std::vector<std::vector<double>> gotD(size);
    std::vector<Status> sums(size, Status::ok());
    auto joined =
        runRanks(size, allRanks(size), 20, [&](int r, HostCollectives &h) {
          got[r] = valuesOf(r, n);
          Status s =
              h.sumFloats(got[r].data(), static_cast<int64_t>(n), preMul);
          gotD[r] = {1e16 * (r + 1), 1.0 + r, -0.1 * r};
          if (s)
            s = h.sum(gotD[r].data(), 3);
          sums[r] = s;
        });
    // The oracle: each rank's values times preMul (in float), added in rank
    // order from rank 0's.
    const float f = static_cast<float>(preMul);
    std::vector<float> want = valuesOf(0, n);
    for (float &x : want)
      x *= f;
    for (int r = 1; r < size; ++r) {
      std::vector<float> v = valuesOf(r, n);
      for (size_t i = 0; i < n; ++i)
        want[i] += v[i] * f;
    }
    std::vector<double> wantD = {1e16, 1.0, 0.0};
    for (int r = 1; r < size; ++r) {
      wantD[0] += 1e16 * (r + 1);
      wantD[1] += 1.0 + r;
      wantD[2] += -0.1 * r;
    }
    for (int r = 0; r < size; ++r) {
      ASSERT_TRUE(joined[r]) << joined[r].message();
      ASSERT_TRUE(sums[r]) << sums[r].message();
      EXPECT_EQ(std::memcmp(got[r].data(), want.data(), n * 4), 0)
          << "rank " << r << " of " << size;
      EXPECT_EQ(std::memcmp(gotD[r].data(), wantD.data(), 3 * 8), 0)
          << "rank " << r << " of " << size;
    }
    // The values are such that another order gives other bits (the test
    // can tell rank order from, say, the reverse).
    if (size == 3) {
      std::vector<float> reverse(n), v0 = valuesOf(0, n), v1 = valuesOf(1, n),
                                     v2 = valuesOf(2, n);
      for (size_t i = 0; i < n; ++i)
        reverse[i] = (v2[i] * f + v1[i] * f) + v0[i] * f;
      EXPECT_NE(std::memcmp(reverse.data(), want.data(), n * 4), 0);
    }
  }
}

TEST(TcpCommunicator, ReduceScatterAndAllGatherLayouts) {
  const int size = 3;
  const int64_t perRank = 100003; // the whole crosses pieces
  const double preMul = 0.5;
  std::vector<std::vector<float>> parts(size);
  std::vector<std::vector<char>> gathered(size);
  std::vector<Status> results(size, Status::ok());
  auto joined =
      runRanks(size, allRanks(size), 20, [&](int r, HostCollectives &h) {
        parts[r] = valuesOf(r, static_cast<size_t>(size * perRank));
        Status s = h.reduceScatterFloats(parts[r].data(), perRank, preMul);
        // Each rank's part of bytes r + 1, gathered.
        gathered[r].assign(static_cast<size_t>(size * 7), 0);
        std::memset(gathered[r].data() + r * 7, r + 1, 7);
        if (s)
          s = h.allGatherBytes(gathered[r].data(), 7);
        results[r] = s;
      });
  const float f = static_cast<float>(preMul);
  std::vector<std::vector<float>> all;
  for (int q = 0; q < size; ++q)
    all.push_back(valuesOf(q, static_cast<size_t>(size * perRank)));
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(joined[r]) << joined[r].message();
    ASSERT_TRUE(results[r]) << results[r].message();
    for (int64_t i = 0; i < size * perRank; ++i) {
      // The sums in rank r's part, the other parts as they were.
      float want = all[r][i];
      if (i / perRank == r) {
        want = all[0][i] * f;
        for (int q = 1; q < size; ++q)
          want += all[q][i] * f;
      }
      ASSERT_EQ(std::memcmp(&parts[r][i], &want, 4), 0)
          << "rank " << r << ", element " << i;
    }
    for (int q = 0; q < size; ++q)
      for (int b = 0; b < 7; ++b)
        EXPECT_EQ(gathered[r][q * 7 + b], q + 1) << "rank " << r;
  }
}

TEST(TcpCommunicator, BroadcastAndNonBlockingSums) {
  const int size = 3;
  std::vector<std::vector<char>> bytes(size);
  std::vector<std::vector<std::vector<float>>> buckets(size);
  std::vector<double> after(size);
  std::vector<Status> results(size, Status::ok());
  auto joined =
      runRanks(size, allRanks(size), 20, [&](int r, HostCollectives &h) {
        bytes[r].assign(64, static_cast<char>(r == 0 ? 42 : 0));
        Status s = h.broadcast(bytes[r].data(), 64);
        // Three buckets started, then a blocking sum (which waits for them),
        // then the buckets waited for.
        for (int k = 0; k < 3 && s; ++k) {
          buckets[r].push_back(
              std::vector<float>(1000 + k, float(r + 1) * (k + 1)));
          s = h.startSum(buckets[r].back().data(), 1000 + k);
        }
        double one = r;
        if (s)
          s = h.sum(&one, 1);
        after[r] = one;
        if (s)
          s = h.waitSums();
        results[r] = s;
      });
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(joined[r]) << joined[r].message();
    ASSERT_TRUE(results[r]) << results[r].message();
    for (char c : bytes[r])
      EXPECT_EQ(c, 42);
    EXPECT_EQ(after[r], 3.0);
    for (int k = 0; k < 3; ++k)
      for (float v : buckets[r][k])
        ASSERT_EQ(v, 6.0f * (k + 1));
  }
}

TEST(TcpCommunicator, ARankThatNeverConnectsTimesOutInOneLine) {
  const auto start = std::chrono::steady_clock::now();
  auto joined = runRanks(3, {0, 1}, 1, [](int, HostCollectives &) {});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 10);
  ASSERT_TRUE(oneLine(joined[0]));
  EXPECT_NE(joined[0].message().find("waited 1 s for rank 2 of 3 to connect"),
            std::string::npos)
      << joined[0].message();
  // Rank 1 learns it when rank 0 gives up, or gives up itself.
  ASSERT_TRUE(oneLine(joined[1])) << joined[1].message();
}

TEST(TcpCommunicator, NoRankZeroTimesOutInOneLine) {
  auto joined = runRanks(2, {1}, 1, [](int, HostCollectives &) {});
  ASSERT_TRUE(oneLine(joined[0]));
  EXPECT_NE(joined[0].message().find("cannot reach rank 0 at 127.0.0.1:"),
            std::string::npos)
      << joined[0].message();
  EXPECT_NE(joined[0].message().find("within 1 s"), std::string::npos)
      << joined[0].message();
}

TEST(TcpCommunicator, APortInUseIsOneLine) {
  // Something else listens on the port.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  auto joined = runRanks(
      2, {0}, 1, [](int, HostCollectives &) {}, ntohs(a.sin_port));
  ::close(fd);
  ASSERT_TRUE(oneLine(joined[0]));
  EXPECT_NE(
      joined[0].message().find("cannot listen for the other ranks on port"),
      std::string::npos)
      << joined[0].message();
  EXPECT_NE(joined[0].message().find("Address already in use"),
            std::string::npos);
}

TEST(TcpCommunicator, RanksThatDisagreeStopInOneLineEach) {
  // Rank 1 believes the run has 3 ranks, rank 0 that it has 2.
  const int port = freePort();
  auto joined = runRanks(0, {0, 1}, 5, [](int, HostCollectives &) {}, port,
                         {tcpWorld(0, 2, port), tcpWorld(1, 3, port)});
  ASSERT_TRUE(oneLine(joined[0]));
  ASSERT_TRUE(oneLine(joined[1]));
  EXPECT_NE(joined[0].message().find("the ranks' WORLD_SIZE differ"),
            std::string::npos)
      << joined[0].message();
  EXPECT_NE(joined[1].message().find("runs 2 ranks, but this rank was started "
                                     "as rank 1 of 3"),
            std::string::npos)
      << joined[1].message();
  // Two processes started as rank 1.
  const int port2 = freePort();
  joined = runRanks(
      0, {0, 1, 1}, 5, [](int, HostCollectives &) {}, port2,
      {tcpWorld(0, 3, port2), tcpWorld(1, 3, port2), tcpWorld(1, 3, port2)});
  ASSERT_TRUE(oneLine(joined[0]));
  EXPECT_NE(joined[0].message().find("two processes were started as rank 1"),
            std::string::npos)
      << joined[0].message();
}

TEST(TcpCommunicator, ALostRankAndMismatchedCollectivesAreOneLine) {
  std::vector<Status> results(2, Status::ok());
  // Rank 1 leaves after the rendezvous; rank 0's sum finds it gone.
  runRanks(2, allRanks(2), 5, [&](int r, HostCollectives &h) {
    if (r == 1)
      return;
    double v = 1;
    results[r] = h.sum(&v, 1);
  });
  ASSERT_TRUE(oneLine(results[0]));
  EXPECT_NE(results[0].message().find("lost rank 1"), std::string::npos)
      << results[0].message();
  // Rank 1 sums three doubles where rank 0 sums two.
  runRanks(2, allRanks(2), 5, [&](int r, HostCollectives &h) {
    double v[3] = {1, 2, 3};
    results[r] = h.sum(v, r == 0 ? 2 : 3);
  });
  ASSERT_TRUE(oneLine(results[0]));
  EXPECT_NE(results[0].message().find(
                "rank 1 called the sum of doubles of 24 bytes where rank 0 "
                "called the sum of doubles of 16 bytes"),
            std::string::npos)
      << results[0].message();
  ASSERT_TRUE(oneLine(results[1]));
}

} // namespace
