// Tests of the data-parallel world read from the launchers' environment
// variables (world.h), against hand-written environments: the launcher, the
// ranks, the transport (MPI or TCP) and the TCP rendezvous's address, and
// the one-line errors of environments that contradict themselves or lack
// MASTER_ADDR or MASTER_PORT.
#include "src/world.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

namespace {

/// Sets the given variables, with every launcher variable unset first, and
/// restores nothing: each test states its whole environment.
void environment(std::initializer_list<std::pair<const char *, const char *>> vars) {
  for (const char *name :
       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_USE_AGENT_STORE", "OTC_RENDEZVOUS_PORT"})
    unsetenv(name);
  for (auto [name, value] : vars)
    setenv(name, value, 1);
}

otcrt::World read() {
  otcrt::World w;
  otcrt::Status s = otcrt::worldFromEnvironment(w);
  EXPECT_TRUE(s) << s.message();
  return w;
}

TEST(World, AloneIsOneRank) {
  environment({});
  otcrt::World w = read();
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.rank, 0);
  EXPECT_TRUE(w.isRoot());
  EXPECT_EQ(w.launcher, "");
}

TEST(World, Mpirun) {
  environment({{"OMPI_COMM_WORLD_RANK", "5"},
               {"OMPI_COMM_WORLD_SIZE", "8"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"RANK", "0"},
               {"WORLD_SIZE", "2"}});
  otcrt::World w = read();
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.localRank, 1);
  EXPECT_EQ(w.launcher, "mpirun");
  EXPECT_EQ(w.transport, otcrt::World::Transport::Mpi);
}

TEST(World, SrunAndTorchrun) {
  environment({{"PMIX_RANK", "3"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_LOCALID", "3"}});
  otcrt::World w = read();
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.localRank, 3);
  EXPECT_EQ(w.launcher, "srun");
  EXPECT_EQ(w.transport, otcrt::World::Transport::Mpi);

  // Without a local rank, the rank (one host); over TCP at MASTER_ADDR.
  environment({{"RANK", "1"},
               {"WORLD_SIZE", "2"},
               {"MASTER_ADDR", "node7"},
               {"MASTER_PORT", "29500"}});
  w = read();
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(w.localRank, 1);
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_EQ(w.transport, otcrt::World::Transport::Tcp);
  EXPECT_EQ(w.masterAddr, "node7");
  EXPECT_EQ(w.masterPort, 29500);
}

// srun without PMI (Slurm's own variables), and srun with PMI where
// MASTER_ADDR asks for TCP.
TEST(World, SrunOverTcp) {
  environment({{"SLURM_PROCID", "5"},
               {"SLURM_NTASKS", "8"},
               {"SLURM_LOCALID", "1"},
               {"MASTER_ADDR", "10.0.0.1"},
               {"MASTER_PORT", "12345"}});
  otcrt::World w = read();
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.localRank, 1);
  EXPECT_EQ(w.launcher, "srun");
  EXPECT_EQ(w.transport, otcrt::World::Transport::Tcp);
  EXPECT_EQ(w.masterPort, 12345);
  environment({{"PMIX_RANK", "2"},
               {"SLURM_PROCID", "2"},
               {"SLURM_NTASKS", "4"},
               {"MASTER_ADDR", "10.0.0.1"},
               {"MASTER_PORT", "12345"}});
  w = read();
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.transport, otcrt::World::Transport::Tcp);
}

// torchrun started by srun (one a node): torchrun's ranks, not Slurm's;
// its agent serves MASTER_PORT, so rank 0 listens on the port after it,
// unless OTC_RENDEZVOUS_PORT says otherwise.
TEST(World, TorchrunInsideSrun) {
  environment({{"SLURM_PROCID", "1"},
               {"SLURM_NTASKS", "2"},
               {"SLURM_LOCALID", "0"},
               {"TORCHELASTIC_RUN_ID", "none"},
               {"TORCHELASTIC_USE_AGENT_STORE", "True"},
               {"RANK", "6"},
               {"WORLD_SIZE", "8"},
               {"LOCAL_RANK", "2"},
               {"MASTER_ADDR", "node0"},
               {"MASTER_PORT", "29500"}});
  otcrt::World w = read();
  EXPECT_EQ(w.rank, 6);
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.localRank, 2);
  EXPECT_EQ(w.launcher, "torchrun");
  EXPECT_EQ(w.masterPort, 29501);
  setenv("OTC_RENDEZVOUS_PORT", "40000", 1);
  w = read();
  EXPECT_EQ(w.masterPort, 40000);
  EXPECT_EQ(w.portSource, "OTC_RENDEZVOUS_PORT");
  environment({});
}

TEST(World, TcpWithoutMasterIsOneLine) {
  otcrt::World w;
  environment({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}});
  otcrt::Status s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_EQ(s.message().rfind("torchrun started 2 ranks, but MASTER_ADDR is "
                              "not set",
                              0),
            0u)
      << s.message();
  environment(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "node0"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_NE(s.message().find("MASTER_PORT is not set"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("scontrol show hostnames"), std::string::npos)
      << s.message();
  environment({{"RANK", "0"},
               {"WORLD_SIZE", "2"},
               {"MASTER_ADDR", "node0"},
               {"MASTER_PORT", "port"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "MASTER_PORT='port' is not a port (1 to 65534)");
  // One rank needs no rendezvous.
  environment({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_TRUE(otcrt::worldFromEnvironment(w));
  environment({});
}

TEST(World, BadValuesAreErrors) {
  otcrt::World w;
  environment({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  otcrt::Status s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "RANK=2 does not lie below WORLD_SIZE=2");
  environment({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "OMPI_COMM_WORLD_RANK='x' is not a rank or a count");
  // torchrun's pair, half set; a local rank past the world.
  environment({{"RANK", "1"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "RANK is set but WORLD_SIZE is not: set both, or "
                         "neither to run alone");
  environment(
      {{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "WORLD_SIZE is set but RANK is not: set both, or "
                         "neither to run alone");
  environment({{"RANK", "0"},
               {"WORLD_SIZE", "2"},
               {"LOCAL_RANK", "2"},
               {"MASTER_ADDR", "a"},
               {"MASTER_PORT", "1"}});
  s = otcrt::worldFromEnvironment(w);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.message(), "LOCAL_RANK=2 does not lie below WORLD_SIZE=2");
  environment({});
}

// World size 1: the host collectives join nothing and leave values as
// they are (a pre-multiplier still applies).
TEST(World, OneRankCollectives) {
  otcrt::HostCollectives host;
  ASSERT_TRUE(host.init(otcrt::World{}));
  EXPECT_FALSE(host.joined());
  double v[2] = {1.5, -2};
  ASSERT_TRUE(host.sum(v, 2));
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(v[1], -2);
  float f[3] = {1, 2, 3};
  ASSERT_TRUE(host.sumFloats(f, 3, 0.5));
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[2], 1.5f);
}

} // namespace
