// Document masking of packed rows (model/document_mask.h, issue 41): several documents in one
// row, attention never crossing a boundary, positions restarting at each. Every attention path a
// training forward can take (the fused CPU kernel per document, SDPA with the dense mask, the
// explicit path with dropout) and every position-dependent part (RoPE, learned positions,
// nanochat's smear and value embeddings, sliding windows) is held to: changing one document
// leaves the others' logits bitwise unchanged, and each document's logits equal the document
// run alone.
#include "model/document_mask.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "kernels/kernel_switch.h"
#include "model/gpt.h"
#include "model_fixtures.h"
#include "options/read_model.h"
#include "test_util.h"

namespace lmtrain::model {
namespace {

// The packed row of the tests: documents of 5, 7 and 4 tokens, then 2 slots of padding.
const std::vector<int64_t> kDocLengths = {5, 7, 4, 2};

at::Tensor doc_ids_of(const std::vector<int64_t>& lengths, int64_t rows) {
  std::vector<int64_t> d;
  for (size_t k = 0; k < lengths.size(); ++k) d.insert(d.end(), lengths[k], (int64_t)k);
  return torch::tensor(d).unsqueeze(0).expand({rows, (int64_t)d.size()}).contiguous();
}

TEST(DocumentMask, PositionsBoundsAndEndTokens) {
  auto doc = torch::tensor({0, 0, 0, 1, 1, 2, 0, 0, 0, 0, 0, 0}, torch::kLong).view({2, 6});
  doc[1].fill_(4);
  DocumentLayout l(doc);
  EXPECT_TRUE(
      torch::equal(l.positions(),
                   torch::tensor({0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 4, 5}, torch::kLong).view({2, 6})));
  ASSERT_EQ(l.bounds().size(), 2u);
  EXPECT_EQ(l.bounds()[0], (std::vector<int64_t>{0, 3, 5, 6}));
  EXPECT_EQ(l.bounds()[1], (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(l.longest(), 6);
  // <|endoftext|> (9) ends its document: the token after it starts the next.
  auto ids = torch::tensor({5, 9, 3, 4, 9, 7}, torch::kLong).view({1, 6});
  EXPECT_TRUE(torch::equal(documents_from_end_token(ids, 9),
                           torch::tensor({0, 0, 1, 1, 1, 2}, torch::kLong).view({1, 6})));
  EXPECT_THROW(DocumentLayout(torch::tensor({0, 1, 0}, torch::kLong).view({1, 3})), Error);
}

TEST(DocumentMask, MaskIsSameDocumentAndCausalAndWindow) {
  auto doc = doc_ids_of(kDocLengths, 1);
  DocumentLayout l(doc);
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t window : {0, 3}) {
    auto m = l.additive_mask(window, torch::TensorOptions().dtype(torch::kFloat));
    ASSERT_EQ(m.sizes(), (std::vector<int64_t>{1, 1, 18, 18}));
    for (int64_t i = 0; i < 18; ++i) {
      for (int64_t j = 0; j < 18; ++j) {
        const bool ok = doc[0][i].item<int64_t>() == doc[0][j].item<int64_t>() && j <= i &&
                        (window == 0 || i - j < window);
        EXPECT_EQ(m[0][0][i][j].item<float>(), ok ? 0.f : -inf) << i << "," << j;
      }
    }
  }
}

core::Config doc_mask_nanochat_config() {
  auto cfg = core::Config::defaults();
  cfg.merge_yaml_file(testing::source_dir() + "/configs/nanochat-d12.yaml");
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"data.seq_len", "32"},         {"model.depth", "0"},          {"model.n_layer", "2"},
      {"model.n_head", "4"},          {"model.n_kv_head", "2"},      {"model.n_embd", "64"},
      {"model.head_dim", "16"},       {"model.vocab_size", "64"},    {"model.block_size", "32"},
      {"model.window_pattern", "SL"}, {"model.value_embeds", "true"}};
  for (const auto& [k, v] : keys) cfg.set(k, v, "test");
  return cfg;
}

}  // namespace

// Named, not anonymous: gtest finds PrintTo beside the parameter's type, and another test's
// anonymous PrintTo could share this file's unity batch.
namespace doc_mask_test {
struct DocMaskCase {
  std::string name;
  GptConfig cfg;
  bool fused_cpu;  // the CPU kernels on (GPT-2's attention takes the per-document kernel)
  double dropout;
};
void PrintTo(const DocMaskCase& c, std::ostream* os) { *os << c.name; }
}  // namespace doc_mask_test

namespace {
using doc_mask_test::DocMaskCase;

std::vector<DocMaskCase> doc_mask_cases() {
  std::vector<DocMaskCase> out;
  GptConfig gpt2 = tiny_gpt_config(32, 64, 32);
  out.push_back({"gpt2_fused_kernel", gpt2, true, 0.0});
  out.push_back({"gpt2_sdpa", gpt2, false, 0.0});
  GptConfig gpt2_window = gpt2;
  gpt2_window.windows = {3, 0};
  out.push_back({"gpt2_window", gpt2_window, true, 0.0});
  GptConfig llama = with_llama_family(tiny_gpt_config(32, 64, 32), Arch::kMistral);
  llama.windows = {4};
  out.push_back({"mistral_window", llama, true, 0.0});
  GptConfig qwen3 = with_llama_family(tiny_gpt_config(32, 64, 32), Arch::kQwen3);
  qwen3.n_head = 4;
  qwen3.n_kv_head = 2;
  out.push_back({"qwen3_gqa", qwen3, true, 0.0});
  out.push_back({"qwen3_gqa_dropout", qwen3, true, 0.1});
  out.push_back({"gpt2_dropout", gpt2, true, 0.1});
  out.push_back({"nanochat", options::read_gpt_config(doc_mask_nanochat_config(), 0), true, 0.0});
  return out;
}

class DocumentMaskModel : public ::testing::TestWithParam<DocMaskCase> {
 protected:
  void SetUp() override { kernels::set_fused_cpu_kernels_enabled(GetParam().fused_cpu); }
  void TearDown() override { kernels::set_fused_cpu_kernels_enabled(true); }
};

// Logits (B, T, V) of a packed forward; with dropout in training mode, the same seed each call.
at::Tensor packed_logits(Gpt& m, const at::Tensor& ids, const DocumentLayout& docs) {
  torch::manual_seed(11);
  return m->forward(ids, &docs).detach();
}

TEST_P(DocumentMaskModel, OtherDocumentsAreBitwiseUnchangedAndEachEqualsItselfAlone) {
  const auto& tc = GetParam();
  GptConfig c = tc.cfg;
  c.dropout = tc.dropout;
  torch::manual_seed(3);
  Gpt m(c);
  if (m->nanochat) {
    torch::NoGradGuard g;
    m->nanochat->smear_lambda.fill_(0.5);  // nanochat starts it at 0: make the smear count
  }
  if (tc.dropout > 0) {
    m->train();
  } else {
    m->eval();
  }
  torch::NoGradGuard g;
  const int64_t B = 2, T = 18;
  auto ids = torch::randint(c.vocab_size, {B, T});
  DocumentLayout docs(doc_ids_of(kDocLengths, B));
  auto base = packed_logits(m, ids, docs);
  // Change document 1 (tokens 5..11) of every row: documents 0 and 2 keep every bit.
  auto changed_ids = ids.clone();
  changed_ids.narrow(1, 5, 7).copy_(torch::randint(c.vocab_size, {B, 7}));
  auto changed = packed_logits(m, changed_ids, docs);
  EXPECT_FALSE(torch::equal(changed.narrow(1, 5, 7), base.narrow(1, 5, 7)));
  EXPECT_TRUE(torch::equal(changed.narrow(1, 0, 5), base.narrow(1, 0, 5)));
  EXPECT_TRUE(torch::equal(changed.narrow(1, 12, 6), base.narrow(1, 12, 6)));
  if (tc.dropout > 0) return;  // alone, a document would draw other dropout masks
  // Each document alone (its own row, positions from 0, no mask) gives its packed logits.
  int64_t at = 0;
  for (int64_t n : kDocLengths) {
    auto alone = m->forward(ids.narrow(1, at, n));
    EXPECT_LE((alone - base.narrow(1, at, n)).abs().max().item<double>(), 2e-5)
        << "document at " << at;
    at += n;
  }
}

// Training: the loss and every gradient of a packed batch are those of the same batch with the
// CPU kernels off (SDPA with the dense mask), and with every block recomputed in backward
// (activation checkpointing holds its own copy of the layout).
TEST_P(DocumentMaskModel, GradientsAgreeAcrossPathsAndRecompute) {
  const auto& tc = GetParam();
  if (tc.dropout > 0) GTEST_SKIP() << "dropout draws differ between paths";
  torch::manual_seed(4);
  Gpt m(tc.cfg);
  m->train();
  const int64_t B = 2, T = 18;
  auto ids = torch::randint(tc.cfg.vocab_size, {B, T});
  auto targets = torch::randint(tc.cfg.vocab_size, {B, T});
  auto grads_of = [&](bool fused, CheckpointPolicy policy) {
    kernels::set_fused_cpu_kernels_enabled(fused);
    m->set_checkpointing(policy);
    m->zero_grad();
    auto loss = [&] {
      DocumentLayout docs(doc_ids_of(kDocLengths, B));  // gone before backward runs
      return m->loss_terms(ids, targets, false, nullptr, &docs).ce;
    }();
    loss.backward();
    std::vector<at::Tensor> g{loss.detach()};
    for (auto& p : m->parameters()) {
      if (p.grad().defined()) g.push_back(p.grad().clone());
    }
    return g;
  };
  auto a = grads_of(true, {});
  auto b = grads_of(false, {});
  auto r = grads_of(tc.fused_cpu, CheckpointPolicy{1});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-5)) << "tensor " << i;
    EXPECT_TRUE(torch::allclose(a[i], r[i], 1e-4, 1e-5)) << "tensor " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, DocumentMaskModel, ::testing::ValuesIn(doc_mask_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace lmtrain::model
