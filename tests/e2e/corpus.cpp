#include "e2e/corpus.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <vector>

#include "test_util.h"

namespace lmtrain::testing {

std::string write_synthetic_corpus(const std::string& dir, int docs, unsigned seed) {
  const std::vector<std::string> subjects = {
      "the cat", "a dog", "the old man", "my friend", "the robot", "a small bird", "the teacher"};
  const std::vector<std::string> verbs = {"sees",   "likes",     "finds",  "builds",
                                          "paints", "remembers", "follows"};
  const std::vector<std::string> objects = {"the red house", "a green tree",  "the quiet river",
                                            "a bright star", "the long road", "an open door"};
  const std::vector<std::string> endings = {".", " today.", " again.", " at night."};
  std::mt19937 rng(seed);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  for (int d = 0; d < docs; ++d) {
    const int sentences = 2 + static_cast<int>(rng() % 4);
    for (int s = 0; s < sentences; ++s) {
      std::string sent = pick(subjects) + " " + pick(verbs) + " " + pick(objects) + pick(endings);
      sent[0] = static_cast<char>(toupper(sent[0]));
      out << sent << (s + 1 < sentences ? " " : "\n");
    }
    out << "%\n";
  }
  return path;
}

std::string prepare_synthetic_data(const std::string& dir) {
  const std::string corpus = write_synthetic_corpus(dir, 600, 7);
  const std::string data = dir + "/data";
  auto r = run_command(lmtrain_binary() + " prepare --input " + corpus + " --output " + data +
                       " --vocab_size 384 --doc_separator % --val_fraction 0.1");
  if (r.exit_code != 0) throw std::runtime_error("prepare failed:\n" + r.output);
  return data;
}

std::string tiny_train_flags() {
  return " --config " + source_dir() +
         "/configs/gpt2-tiny.yaml --model.n_layer=2 --model.n_head=2 --model.n_embd=32"
         " --model.block_size=32 --data.seq_len=32 --train.micro_batch_size=8"
         " --train.total_batch_size=512 --optim.warmup_steps=5 --train.eval_batches=4"
         " --train.threads=1 --log.every=1 --train.eval_every=0 --checkpoint.every=0";
}

std::string tiny_moe_flags() {
  return tiny_train_flags() +
         " --model.mlp=swiglu --model.moe.num_experts=4 --model.moe.top_k=2"
         " --model.moe.expert_hidden=32 --model.moe.aux_loss_coef=0"
         " --model.moe.z_loss_coef=0.01 --model.moe.bias_update_rate=0.01";
}

}  // namespace lmtrain::testing
