#include "e2e/dist_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "checkpoint/checkpoint_store.h"
#include "core/safetensors.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"

namespace lmtrain::testing {

int free_port() { return dist::pick_free_port(); }

std::vector<CommandResult> run_parallel(const std::vector<std::string>& commands) {
  std::vector<CommandResult> results(commands.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < commands.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = run_command(commands[i]); });
  }
  for (auto& t : threads) t.join();
  return results;
}

double max_param_rel_diff(const std::string& ckpt_a, const std::string& ckpt_b,
                          const std::string& file) {
  // Through the store, so that a sharded checkpoint's model.safetensors is assembled from its
  // shards (checkpoint/sharded_reader.h).
  const auto ca = train::CheckpointStore::load(ckpt_a, /*allow_fallback=*/false, {file});
  const auto cb = train::CheckpointStore::load(ckpt_b, /*allow_fallback=*/false, {file});
  const auto& a = ca.files.at(file);
  const auto& b = cb.files.at(file);
  EXPECT_EQ(a.names, b.names);
  double worst = 0;
  for (const auto& [name, tb] : b.tensors) {
    auto it = a.tensors.find(name);
    if (it == a.tensors.end()) continue;
    const double scale = tb.abs().max().item<double>();
    const double diff = (it->second - tb).abs().max().item<double>();
    worst = std::max(worst, diff / std::max(scale, 1e-12));
  }
  return worst;
}

double max_rel_diff_by_name(const std::string& ckpt_a, const std::string& ckpt_b,
                            const std::string& file) {
  const auto ca = train::CheckpointStore::load(ckpt_a, /*allow_fallback=*/false, {file});
  const auto cb = train::CheckpointStore::load(ckpt_b, /*allow_fallback=*/false, {file});
  const auto &ta = ca.files.at(file).tensors, &tb = cb.files.at(file).tensors;
  EXPECT_EQ(ta.size(), tb.size()) << file;
  double worst = 0;
  for (const auto& [name, t] : tb) {
    auto it = ta.find(name);
    if (it == ta.end()) {
      ADD_FAILURE() << ckpt_a << " has no '" << name << "' in " << file;
      continue;
    }
    const double scale = std::max(t.abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (it->second - t).abs().max().item<double>() / scale);
  }
  return worst;
}

std::string lmtrain_on_ranks(int ranks, const std::string& args) {
  if (ranks == 1) return lmtrain_binary() + " " + args;
  return lmtrain_binary() + " launch --nproc_per_node=" + std::to_string(ranks) +
         " --master_port=" + std::to_string(free_port()) + " -- " + args;
}

void expect_run_matches(const std::string& run, const std::string& base, double loss_rel,
                        double param_rel) {
  const auto l = logged_losses(run), want = logged_losses(base);
  ASSERT_EQ(l.size(), want.size()) << run;
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_LE(std::abs(l[i] - want[i]), loss_rel * std::abs(want[i])) << run << " step " << i + 1;
  }
  EXPECT_LE(max_param_rel_diff(run + "/checkpoints/latest", base + "/checkpoints/latest"),
            param_rel)
      << run;
}

void expect_commands_read_alike(const std::string& ckpt, const std::string& whole,
                                const std::string& data_dir, const std::string& scratch) {
  for (const auto& [from, to] : {std::pair{ckpt, "/hf_sharded"}, std::pair{whole, "/hf_whole"}}) {
    auto x = run_command(lmtrain_binary() + " export hf " + from + " " + scratch + to);
    ASSERT_EQ(x.exit_code, 0) << x.output;
  }
  const auto hs = core::read_safetensors(scratch + "/hf_sharded/model.safetensors");
  const auto hw = core::read_safetensors(scratch + "/hf_whole/model.safetensors");
  ASSERT_EQ(hs.names, hw.names);
  for (const auto& [name, t] : hw.tensors) {
    EXPECT_LE((hs.tensors.at(name) - t).abs().max().item<double>(),
              1e-5 * t.abs().max().item<double>())
        << name;
  }
  auto eval_loss = [&](const std::string& checkpoint) {
    auto e = run_command(lmtrain_binary() + " eval --checkpoint " + checkpoint + " --data_dir " +
                         data_dir + " --batches 2 --batch_size 12");
    EXPECT_EQ(e.exit_code, 0) << e.output;
    return logged_number(e.output, "val loss");
  };
  const double sharded_loss = eval_loss(ckpt);
  EXPECT_GT(sharded_loss, 0);
  EXPECT_NEAR(sharded_loss, eval_loss(whole), 2e-4);
}

void expect_killed_save_keeps_previous(const std::string& run_dir, const std::string& train_args) {
  auto r = run_command(
      "LMTRAIN_FAULT_KILL_SAVE=1:4 " + lmtrain_binary() +
      " launch --nproc_per_node=2 --grace_s=5 --master_port=" + std::to_string(free_port()) +
      " -- train" + train_args + " --checkpoint.every=2");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("while saving the checkpoint of step 4"), std::string::npos) << r.output;
  EXPECT_EQ(std::filesystem::read_symlink(run_dir + "/checkpoints/latest").string(),
            "step_00000002")
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/checkpoints/step_00000004")) << r.output;
  EXPECT_NO_THROW(train::CheckpointStore::verify(run_dir + "/checkpoints/latest"));
}

std::vector<nlohmann::json> step_records(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(std::move(j));
  }
  return out;
}

int64_t logged_count(const std::string& output, const std::string& key) {
  std::smatch m;
  const std::regex re(key + ":? ([0-9]+)");
  if (!std::regex_search(output, m, re)) return -1;
  return std::stoll(m[1]);
}

double logged_number(const std::string& output, const std::string& key) {
  std::smatch m;
  const std::regex re(key + ": ([0-9.eE+-]+)");
  if (!std::regex_search(output, m, re)) return -1;
  return std::stod(m[1]);
}

std::vector<double> logged_losses(const std::string& run_dir) {
  std::vector<double> losses;
  for (const auto& j : step_records(run_dir)) losses.push_back(j["loss"].get<double>());
  return losses;
}

double last_logged_loss(const std::string& run_dir) {
  const auto losses = logged_losses(run_dir);
  return losses.empty() ? -1 : losses.back();
}

std::vector<std::string> run_ranks_in_process(
    int world, const std::function<void(int rank, dist::Group& group)>& body) {
  // libtorch 2.11's flight recorder (one per process) inserts into its map of process-group
  // statuses without its lock on every Gloo enqueue; ranks that are threads of one process race
  // there and can corrupt the map (seen: a rank spinning forever inside
  // FlightRecorder::recordWithResetEnabled). A rank per process, as in real runs, never does.
  // Recording off (the buffer size is read when the recorder is first created; ctest sets it for
  // every test, this covers a direct run of the binary).
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
  const int port = free_port();
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        dist::DistEnv env;
        env.rank = r;
        env.world_size = world;
        env.local_rank = r;
        env.local_world_size = world;
        env.master_port = port;
        env.source = "test";
        dist::GroupOptions opts;
        opts.init_timeout_s = 30;
        opts.timeout_s = 30;
        auto group = dist::make_group(env, opts);
        body(r, *group);
        group->barrier();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace lmtrain::testing
