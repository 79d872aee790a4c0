#include "e2e/dist_harness.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "core/safetensors.h"
#include "dist/rendezvous.h"

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

double max_param_rel_diff(const std::string& ckpt_a, const std::string& ckpt_b) {
  const auto a = core::read_safetensors(ckpt_a + "/model.safetensors");
  const auto b = core::read_safetensors(ckpt_b + "/model.safetensors");
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

double last_logged_loss(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  double loss = -1;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) loss = j["loss"].get<double>();
  }
  return loss;
}

}  // namespace lmtrain::testing
