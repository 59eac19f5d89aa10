// Tests of the data-parallel world read from the launchers' environment
// variables (world.h), against hand-written environments.
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
        "LOCAL_RANK"})
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

  // Without a local rank, the rank (one host).
  environment({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  w = read();
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(w.localRank, 1);
  EXPECT_EQ(w.launcher, "torchrun");
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
