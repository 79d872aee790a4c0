// Hugging Face directories lmtrain cannot reproduce exactly are usage errors (exit 2) that name
// the key or tensor, never an import that would give different logits. Each case starts from
// a valid fixture (tests/fixtures/hf) and changes one thing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

class HfBadInput : public ::testing::Test {
 protected:
  // A copy of fixture `name` with its config.json edited by `edit`.
  std::string copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const std::string dir = tmp_.file(name + "_" + std::to_string(count_++));
    fs::copy(source_dir() + "/tests/fixtures/hf/" + name, dir, fs::copy_options::recursive);
    auto cfg = nlohmann::json::parse(read_text(dir + "/config.json"));
    edit(cfg);
    write_text(dir + "/config.json", cfg.dump(2));
    return dir;
  }
  // `lmtrain import hf DIR` must exit 2 with `message` in its output.
  void expect_usage_error(const std::string& dir, const std::string& message) {
    auto r = run_command(lmtrain_binary() + " import hf " + dir + " --output " + dir + "_run");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir + "_run/checkpoints/latest")) << r.output;
  }
  TempDir tmp_{"lmtrain_hf_bad"};
  int count_ = 0;
};

TEST_F(HfBadInput, UnsupportedArchitecture) {
  expect_usage_error(copy("llama", [](auto& c) { c["model_type"] = "gemma3"; }),
                     "model_type 'gemma3' is not supported (supported: gpt2, llama, mistral");
  // A Llama checkpoint relabelled mistral keeps its Llama class: refused, naming both.
  expect_usage_error(copy("llama", [](auto& c) { c["model_type"] = "mistral"; }),
                     "architectures 'LlamaForCausalLM' is not supported for model_type mistral");
  expect_usage_error(
      copy("llama", [](auto& c) { c["architectures"] = {"LlamaForSequenceClassification"}; }),
      "architectures 'LlamaForSequenceClassification' is not supported");
}

TEST_F(HfBadInput, MissingTensor) {
  const std::string dir = copy("qwen3", [](auto&) {});
  auto f = core::read_safetensors(dir + "/model.safetensors");
  core::NamedTensors kept;
  for (const auto& name : f.names) {
    if (name != "model.layers.1.self_attn.k_norm.weight") kept.emplace_back(name, f.tensors[name]);
  }
  core::write_safetensors(dir + "/model.safetensors", kept);
  expect_usage_error(dir, "no tensor 'model.layers.1.self_attn.k_norm.weight'");
}

TEST_F(HfBadInput, TensorOfTheWrongShape) {
  // 2 kv heads stored, 4 claimed: k_proj has 16 rows, the config implies 32.
  expect_usage_error(copy("llama", [](auto& c) { c["num_key_value_heads"] = 4; }),
                     "'model.layers.0.self_attn.k_proj.weight' has shape [16, 32], the config "
                     "implies [32, 32]");
  const std::string dir = copy("gpt2", [](auto&) {});
  auto f = core::read_safetensors(dir + "/model.safetensors");
  core::NamedTensors edited;
  for (const auto& name : f.names) {
    auto t = f.tensors[name];
    if (name == "transformer.h.1.mlp.c_fc.weight") t = t.narrow(1, 0, 100).contiguous();
    edited.emplace_back(name, t);
  }
  core::write_safetensors(dir + "/model.safetensors", edited);
  expect_usage_error(dir, "'transformer.h.1.mlp.c_fc.weight' has shape [32, 100]");
}

TEST_F(HfBadInput, RopeScalingLmtrainLacks) {
  // longrope and unknown types, 5.x and 4.x style ("type" in older 4.x configs).
  expect_usage_error(copy("qwen3",
                          [](auto& c) {
                            c["rope_parameters"] = {{"rope_type", "longrope"},
                                                    {"rope_theta", 1e6},
                                                    {"short_factor", {1.0}},
                                                    {"long_factor", {1.0}}};
                          }),
                     "rope_parameters.rope_type 'longrope'");
  expect_usage_error(copy("qwen2_v4",
                          [](auto& c) {
                            c["rope_scaling"] = {{"type", "su"}, {"factor", 4.0}};
                          }),
                     "rope_scaling.rope_type 'su'");
  expect_usage_error(copy("llama",
                          [](auto& c) {
                            c["rope_parameters"] = {{"rope_type", "default"},
                                                    {"rope_theta", 1e4},
                                                    {"partial_rotary_factor", 0.5}};
                          }),
                     "partial_rotary_factor");
  // A factor below 1 and rope_scaling disagreeing with rope_parameters.
  expect_usage_error(copy("llama_v4",
                          [](auto& c) {
                            c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.5}};
                          }),
                     "rope_scaling.factor must be a number >= 1, got 0.5");
  expect_usage_error(
      copy("llama",
           [](auto& c) {
             c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
             c["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"rope_theta", 1e4}};
           }),
      "rope_scaling.rope_type 'linear' and rope_parameters.rope_type 'yarn' "
      "disagree");
  // Both styles present and disagreeing: 4.x and 5.x would build different models.
  expect_usage_error(copy("qwen2", [](auto& c) { c["rope_theta"] = 10000.0; }),
                     "rope_theta 10000 and rope_parameters.rope_theta 1000000 disagree");
}

TEST_F(HfBadInput, SlidingWindowsLmtrainLacks) {
  // Qwen3-MoE's windows are refused, 5.x and 4.x style.
  expect_usage_error(copy("qwen3_moe",
                          [](auto& c) {
                            c["use_sliding_window"] = true;
                            c["sliding_window"] = 4;
                            c["layer_types"] = {"full_attention", "sliding_attention"};
                          }),
                     "sliding_window=4 with use_sliding_window=true");
  expect_usage_error(copy("qwen3_moe_v4",
                          [](auto& c) {
                            c["use_sliding_window"] = true;
                            c["sliding_window"] = 8;
                            c["max_window_layers"] = 0;
                          }),
                     "sliding_window=8 with use_sliding_window=true (2 of 2 layers");
  expect_usage_error(copy("qwen2",
                          [](auto& c) {
                            c["use_sliding_window"] = true;
                            c["sliding_window"] = 0;
                          }),
                     "sliding_window must be >= 1 or null, got 0");
  expect_usage_error(copy("qwen2",
                          [](auto& c) {
                            c["use_sliding_window"] = true;
                            c["sliding_window"] = 4;
                            c["layer_types"] = {"full_attention", "chunked_attention"};
                          }),
                     "layer_types[1] 'chunked_attention' is not supported");
  // What imports, and the windows it gives (config.yaml's model.windows): a window as long
  // as the context or not in use changes nothing; Qwen2's sliding layers; Mixtral's window.
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](auto& c) {
         c["use_sliding_window"] = true;
         c["sliding_window"] = 64;
         c["layer_types"] = {"sliding_attention", "sliding_attention"};
       },
       "windows: \"\""},
      {[](auto& c) {
         c["use_sliding_window"] = false;
         c["sliding_window"] = 4;
         c["layer_types"] = {"sliding_attention", "sliding_attention"};
       },
       "windows: \"\""},
      {[](auto& c) {
         c["use_sliding_window"] = true;
         c["sliding_window"] = 4;
         c["layer_types"] = {"full_attention", "sliding_attention"};
       },
       "windows: \"0,4\""}};
  for (const auto& [edit, want] : cases) {
    const std::string dir = copy("qwen2", edit);
    auto r = run_command(lmtrain_binary() + " import hf " + dir + " --output " + dir + "_run");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(read_text(dir + "_run/config.yaml").find(want), std::string::npos)
        << read_text(dir + "_run/config.yaml");
  }
  const std::string mixtral = copy("mixtral", [](auto& c) { c["sliding_window"] = 3; });
  auto r =
      run_command(lmtrain_binary() + " import hf " + mixtral + " --output " + mixtral + "_run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_text(mixtral + "_run/config.yaml").find("windows: \"3\""), std::string::npos);
}

// Sizes are checked before anything is allocated in proportion to them: 1e8 and 1e9 layers
// without layer_types once allocated gigabytes (or ended in std::bad_alloc) before the range
// check of model.n_layer. Also in fuzz/regressions/hf_config/.
TEST_F(HfBadInput, HugeLayerCountIsRefusedBeforeAllocating) {
  for (const double layers : {1e8, 1e9}) {
    for (const bool sliding : {false, true}) {
      expect_usage_error(
          copy("qwen2",
               [&](auto& c) {
                 c.erase("layer_types");
                 c["num_hidden_layers"] = layers;
                 c["max_window_layers"] = 0;
                 c["use_sliding_window"] = sliding;
                 c["sliding_window"] = 16;
               }),
          sliding ? "with sliding windows is more layers than lmtrain holds" : "'model.n_layer'");
    }
  }
}

TEST_F(HfBadInput, WrongTypesNameTheFileTheKeyAndTheType) {
  const std::string nested =
      copy("qwen2", [](auto& c) { c["rope_parameters"]["rope_theta"] = "big"; });
  expect_usage_error(nested, nested + "/config.json: rope_theta must be a number, got \"big\"");
  const std::string top = copy("qwen3_v4", [](auto& c) { c["rope_theta"] = "big"; });
  expect_usage_error(top, top + "/config.json: rope_theta must be a number, got \"big\"");
  const std::string heads = copy("llama", [](auto& c) { c["num_attention_heads"] = "4"; });
  expect_usage_error(heads, "num_attention_heads must be an integer, got \"4\"");
}

TEST_F(HfBadInput, OtherOptionsThatChangeTheModel) {
  expect_usage_error(copy("qwen3", [](auto& c) { c["attention_bias"] = true; }),
                     "attention_bias=true is not supported");
  expect_usage_error(copy("llama", [](auto& c) { c["mlp_bias"] = true; }),
                     "mlp_bias=true is not supported");
  expect_usage_error(copy("llama", [](auto& c) { c["hidden_act"] = "gelu"; }),
                     "hidden_act 'gelu' is not supported");
  expect_usage_error(copy("gpt2", [](auto& c) { c["scale_attn_by_inverse_layer_idx"] = true; }),
                     "scale_attn_by_inverse_layer_idx=true is not supported");
  expect_usage_error(copy("gpt2", [](auto& c) { c["activation_function"] = "relu"; }),
                     "activation_function 'relu' is not supported");
  expect_usage_error(copy("qwen2",
                          [](auto& c) {
                            c["quantization_config"] = {{"quant_method", "gptq"}};
                          }),
                     "quantization_config is not supported");
}

TEST_F(HfBadInput, SizesThatAreZeroOrHuge) {
  // num_attention_heads 0 divided hidden_size by zero (SIGFPE); found by fuzz/hf_config.
  expect_usage_error(copy("llama", [](auto& c) { c["num_attention_heads"] = 0; }),
                     "num_attention_heads must be an integer in [1, 2147483648], got 0");
  expect_usage_error(copy("qwen3", [](auto& c) { c["hidden_size"] = int64_t{1} << 62; }),
                     "hidden_size must be an integer in [1, 2147483648]");
  expect_usage_error(copy("gpt2", [](auto& c) { c["n_head"] = -2; }),
                     "n_head must be an integer in [1, 2147483648], got -2");
  // A float where an integer belongs: 1e108 was cast to an integer, undefined behaviour.
  expect_usage_error(copy("qwen2", [](auto& c) { c["num_hidden_layers"] = 1e108; }),
                     "num_hidden_layers is not an integer: 1e+108");
}

}  // namespace
}  // namespace lmtrain::testing
