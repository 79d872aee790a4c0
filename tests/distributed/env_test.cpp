// Rank discovery from torchrun, Open MPI and Slurm environments.
#include "distributed/env.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace lmtrain::dist {
namespace {

DistEnv from(const std::map<std::string, std::string>& vars) {
  return discover_env([&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(DistEnv, NoVariablesIsASingleProcess) {
  const auto e = from({});
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.source, "none");
}

TEST(DistEnv, TorchrunVariables) {
  const auto e = from({{"RANK", "3"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "10.0.0.7"},
                       {"MASTER_PORT", "29400"},
                       {"TORCHELASTIC_RESTART_COUNT", "2"},
                       {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_TRUE(e.use_agent_store);
  EXPECT_FALSE(e.launched_by_lmtrain);
}

TEST(DistEnv, OpenMpiVariables) {
  const auto e = from({{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(e.source, "mpi");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnv, TorchrunVariablesWinOverMpiAndSlurm) {
  const auto e = from({{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"SLURM_PROCID", "1"},
                       {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 0);
}

TEST(DistEnv, SlurmVariablesDeriveMasterFromTheNodeList) {
  const auto e = from({{"SLURM_PROCID", "5"},
                       {"SLURM_NTASKS", "8"},
                       {"SLURM_LOCALID", "1"},
                       {"SLURM_TASKS_PER_NODE", "4(x2)"},
                       {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                       {"SLURM_JOB_ID", "123456"}});
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 20000 + 123456 % 10000);
}

TEST(DistEnv, SlurmNodeLists) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("node[001-004,007]"), "node001");
  EXPECT_EQ(first_slurm_host("a[3,5],b[1-2]"), "a3");
  EXPECT_EQ(first_slurm_host("rack1-n[10-12]x"), "rack1-n10x");
}

void expect_usage_error(const std::map<std::string, std::string>& vars, const std::string& needle) {
  try {
    from(vars);
    FAIL() << "expected a UsageError mentioning " << needle;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DistEnv, BadValuesNameTheVariable) {
  expect_usage_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2");
  expect_usage_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x'");
  expect_usage_error({{"RANK", "0"}}, "WORLD_SIZE is not set");
  expect_usage_error({{"WORLD_SIZE", "2"}}, "RANK is not set");
  expect_usage_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}},
                     "MASTER_PORT=70000");
  expect_usage_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE must be >= 1");
  expect_usage_error({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                     "OMPI_COMM_WORLD_RANK=3");
}

}  // namespace
}  // namespace lmtrain::dist
