// The soft-token path of the time-series encoder against its PyTorch reference
// (bench/reference/temporal_encoder.py, which wrote tests/fixtures/temporal/): the encoder's
// weights from the fixture, the frozen LM imported from the Hugging Face fixture it was run
// with (qwen2), the same batch (curves with padding and a NaN at a masked position, prompts with
// placeholder slots, answer-only targets). The loss and the gradient of every encoder parameter
// agree within 1e-5, for one soft token per patch and for attention pooling.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_model.h"
#include "core/safetensors.h"
#include "model/soft_tokens.h"
#include "model/temporal/temporal_encoder.h"
#include "objective/temporal_objective.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

model::temporal::TemporalEncoderOptions options_of(const nlohmann::json& j) {
  model::temporal::TemporalEncoderOptions o;
  o.channels = j["channels"];
  o.max_length = j["max_length"];
  o.patch_len = j["patch_len"];
  o.stride = j["stride"];
  o.layers = j["layers"];
  o.width = j["width"];
  o.heads = j["heads"];
  o.mlp_ratio = j["mlp_ratio"];
  o.num_tokens = j["num_tokens"];
  o.lm_width = j["lm_width"];
  return o;
}

TEST(TemporalParity, SoftTokenLossAndEncoderGradientsMatchPyTorch) {
  const std::string fixtures = source_dir() + "/tests/fixtures/temporal";
  const auto summary = nlohmann::json::parse(read_text(fixtures + "/fixture.json"));
  TempDir dir("lmtrain_temporal_parity");
  auto r = run_command(lmtrain_binary() + " import hf " + source_dir() + "/" +
                       summary["lm"].get<std::string>() + " --output " + dir.file("lm"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lm = train::load_inference_model(dir.file("lm"));
  for (auto& p : lm.model->parameters()) p.requires_grad_(false);  // frozen

  for (const auto& [name, variant] : summary["variants"].items()) {
    SCOPED_TRACE(name);
    auto f = core::read_safetensors(fixtures + "/" + name + ".safetensors");
    model::temporal::TemporalEncoder enc(options_of(variant["options"]), /*init=*/false);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : enc->named_parameters()) {
        ASSERT_TRUE(f.tensors.count("weight." + item.key())) << item.key();
        item.value().copy_(f.tensors.at("weight." + item.key()));
      }
    }
    auto valid = f.tensors.at("valid").to(torch::kBool);
    auto out = enc->forward(f.tensors.at("values"), valid);
    model::SoftTokens soft{f.tensors.at("slots").to(torch::kBool), out.tokens.index({out.valid})};
    auto terms = lm.model->loss_terms(f.tensors.at("ids"), f.tensors.at("targets"),
                                      /*masked=*/true, &soft);
    const float expected = f.tensors.at("loss").item<float>();
    EXPECT_NEAR(terms.ce.item<float>(), expected, 1e-5);
    // The objective, on the batch layout the trainer feeds it: the same loss with K = 1 series
    // slot per sample, and with a second, unused slot (whatever it holds).
    const auto values = f.tensors.at("values");  // (B, C, L)
    for (const bool spare : {false, true}) {
      auto series = values.unsqueeze(1), series_valid = valid.unsqueeze(1);
      auto used = torch::ones({values.size(0), 1}, torch::kBool);
      if (spare) {
        series = torch::cat({series, torch::randn_like(series)}, 1);
        series_valid = torch::cat({series_valid, torch::ones_like(series_valid)}, 1);
        used = torch::cat({used, torch::zeros_like(used)}, 1);
      }
      auto batch = train::Batch::with_mask(f.tensors.at("ids"), f.tensors.at("targets"));
      batch.tensors["series"] = series;
      batch.tensors["series_valid"] = series_valid;
      batch.tensors["series_used"] = used;
      batch.tensors["soft_slots"] = soft.slots;
      train::TemporalAlignmentObjective objective(enc);
      EXPECT_NEAR(objective.compute(*lm.model, batch).loss.item<float>(), expected, 1e-5)
          << "spare slot " << spare;
      EXPECT_EQ(objective.trained_module(), enc.get());
    }
    terms.ce.backward();
    for (auto& item : enc->named_parameters()) {
      const auto& want = f.tensors.at("grad." + item.key());
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      const float diff = (item.value().grad() - want).abs().max().item<float>();
      EXPECT_LE(diff, 1e-5 * std::max(1.0f, want.abs().max().item<float>())) << item.key();
    }
  }
}

}  // namespace
}  // namespace lmtrain::testing
