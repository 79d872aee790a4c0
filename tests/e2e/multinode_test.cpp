// Two "nodes" x 2 ranks over a real network link: two Linux network namespaces joined by a veth
// pair, each running `lmtrain launch --nnodes=2`. The 4-rank result must equal the 1-rank run
// on the same global batch. Skipped, with the reason, where namespaces can't be made (no root
// or no CAP_SYS_ADMIN, e.g. in an unprivileged container).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

class TwoNamespaces {
 public:
  TwoNamespaces() {
    const std::string id = std::to_string(::getpid() % 100000);
    a_ = "lmt_a" + id;
    b_ = "lmt_b" + id;
    const std::string va = "lva" + id, vb = "lvb" + id;
    const auto r = run_command(
        "set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + va +
        " type veth peer name " + vb + "; ip link set " + va + " netns " + a_ + "; ip link set " +
        vb + " netns " + b_ + "; ip -n " + a_ + " addr add " + kAddrA + "/24 dev " + va +
        "; ip -n " + b_ + " addr add " + kAddrB + "/24 dev " + vb + "; ip -n " + a_ + " link set " +
        va + " up; ip -n " + b_ + " link set " + vb + " up; ip -n " + a_ +
        " link set lo up; ip -n " + b_ + " link set lo up");
    ok_ = r.exit_code == 0;
    error_ = r.output;
  }
  ~TwoNamespaces() { run_command("ip netns del " + a_ + "; ip netns del " + b_); }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string exec_a(const std::string& cmd) const { return "ip netns exec " + a_ + " " + cmd; }
  std::string exec_b(const std::string& cmd) const { return "ip netns exec " + b_ + " " + cmd; }

  static constexpr const char* kAddrA = "10.231.77.1";
  static constexpr const char* kAddrB = "10.231.77.2";

 private:
  std::string a_, b_, error_;
  bool ok_ = false;
};

TEST(MultiNode, TwoNodesOfTwoRanksOverVethMatchOneRank) {
  TwoNamespaces ns;
  if (!ns.ok()) {
    GTEST_SKIP() << "cannot create network namespaces here (needs root / CAP_SYS_ADMIN and "
                    "iproute2): "
                 << ns.error();
  }
  TempDir dir("lmtrain_multinode");
  const std::string data = prepare_synthetic_data(dir.path());
  // optim.eps=1e-6: see ddp_test.cpp (Adam and analytically-zero gradients).
  auto flags = [&](const std::string& run) {
    return tiny_train_flags() + " --data.dir=" + data + " --run.dir=" + run +
           " --train.max_steps=10 --optim.eps=1e-6 --dist.init_timeout_s=60";
  };
  const std::string one = dir.file("one_rank"), four = dir.file("two_nodes");
  auto base = run_command(lmtrain_binary() + " train" + flags(one) + " --train.micro_batch_size=8");
  ASSERT_EQ(base.exit_code, 0) << base.output;

  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank) {
    return lmtrain_binary() + " launch --nnodes=2 --node_rank=" + std::to_string(node_rank) +
           " --nproc_per_node=2 --master_addr=" + TwoNamespaces::kAddrA + " --master_port=" + port +
           " -- train" + flags(four) + " --train.micro_batch_size=4";
  };
  const auto rs = run_parallel({ns.exec_a(node(0)), ns.exec_b(node(1))});
  ASSERT_EQ(rs[0].exit_code, 0) << rs[0].output << rs[1].output;
  ASSERT_EQ(rs[1].exit_code, 0) << rs[0].output << rs[1].output;
  EXPECT_NE(rs[0].output.find("rank 0 of 4"), std::string::npos) << rs[0].output;
  // Node 1's ranks reached the master over the veth link, from their own address.
  EXPECT_NE(rs[1].output.find("starting ranks 2..3 of 4 (master 10.231.77.1"), std::string::npos)
      << rs[1].output;
  EXPECT_LE(max_param_rel_diff(four + "/checkpoints/latest", one + "/checkpoints/latest"), 1e-5);
  EXPECT_NEAR(last_logged_loss(four), last_logged_loss(one), 1e-5);
}

}  // namespace
}  // namespace lmtrain::testing
