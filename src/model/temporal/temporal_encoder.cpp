#include "model/temporal/temporal_encoder.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "model/temporal/patching.h"
#include "model/temporal/series_norm.h"

namespace lmtrain::model::temporal {
namespace {

// Multi-head attention of q (B, Sq, W) over k, v (B, Sk, W), keys masked by key_valid (B, Sk).
torch::Tensor series_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& key_valid,
                               int64_t heads) {
  const int64_t B = q.size(0), Sq = q.size(1), Sk = k.size(1), W = q.size(2);
  const int64_t D = W / heads;
  auto split = [&](const torch::Tensor& t, int64_t S) {
    return t.reshape({B, S, heads, D}).transpose(1, 2);  // (B, H, S, D)
  };
  auto mask = key_valid.reshape({B, 1, 1, Sk});  // true: may attend
  auto y = at::scaled_dot_product_attention(split(q, Sq), split(k, Sk), split(v, Sk), mask);
  return y.transpose(1, 2).reshape({B, Sq, W});
}

ParamTag matrix_tag(InitRule init = InitRule::kNormal) { return block_matrix_tag(init); }

// The pooling and projector matrices start as nn.Linear does (LLaVA's projector), U(+-1/sqrt(in)):
// scale-preserving, where N(0, 0.02) would shrink their output to a mean square near 1e-5 or
// below, under the RMSNorm's epsilon, and the soft tokens would not start at the LM's RMS.
ParamTag fan_in_tag() { return block_matrix_tag(InitRule::kKaimingUniform); }

}  // namespace

void check_temporal_options(const TemporalEncoderOptions& o) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw UsageError("model.temporal: " + what);
  };
  need(o.channels >= 1, "channels must be >= 1");
  need(o.patch_len >= 1 && o.stride >= 1, "patch_len and stride must be >= 1");
  need(o.max_length >= 1, "max_length must be >= 1");
  need(o.layers >= 0 && o.width >= 1 && o.heads >= 1 && o.mlp_ratio >= 1,
       "layers >= 0, width, heads and mlp_ratio >= 1");
  need(o.width % o.heads == 0, "width " + std::to_string(o.width) + " is not a multiple of heads " +
                                   std::to_string(o.heads));
  need(o.num_tokens >= 0, "num_tokens must be >= 0 (0: one soft token per patch)");
  need(o.lm_width >= 1, "lm_width (the decoder's n_embd) must be >= 1");
  need(o.projector != ProjectorKind::kVocabMix || o.lm_vocab >= 1,
       "projector vocab_mix needs lm_vocab (the decoder's vocab_size) >= 1");
}

ProjectorKind parse_projector_kind(const std::string& name) {
  if (name == "mlp") return ProjectorKind::kMlp;
  if (name == "vocab_mix") return ProjectorKind::kVocabMix;
  throw UsageError("model.temporal.projector: unknown projector '" + name +
                   "' (choose mlp or vocab_mix)");
}

SeriesEncoderBlockImpl::SeriesEncoderBlockImpl(const TemporalEncoderOptions& o) : heads(o.heads) {
  const int64_t W = o.width, H = o.mlp_ratio * o.width;
  ln_1 = register_module("ln_1", LayerNorm(W, true, false, o.norm_eps));
  attn_qkv = register_module("attn_qkv", Linear(W, 3 * W, true, matrix_tag()));
  attn_proj = register_module("attn_proj", Linear(W, W, true, matrix_tag(InitRule::kResidualProj)));
  ln_2 = register_module("ln_2", LayerNorm(W, true, false, o.norm_eps));
  fc = register_module("fc", Linear(W, H, true, matrix_tag()));
  proj = register_module("proj", Linear(H, W, true, matrix_tag(InitRule::kResidualProj)));
}

torch::Tensor SeriesEncoderBlockImpl::forward(const torch::Tensor& x,
                                              const torch::Tensor& key_valid) {
  auto qkv = attn_qkv(ln_1(x)).chunk(3, -1);  // 3 x (B, S, W)
  auto h = x + attn_proj(series_attention(qkv[0], qkv[1], qkv[2], key_valid, heads));
  return h + proj(torch::gelu(fc(ln_2(h))));
}

TemporalEncoderImpl::TemporalEncoderImpl(const TemporalEncoderOptions& o, bool init) : options_(o) {
  check_temporal_options(o);
  const int64_t W = o.width, D = o.lm_width, C = o.channels;
  patch_embed =
      register_module("patch_embed", Linear(kPatchFeatureGroups * C * o.patch_len, W, true));
  stats_embed = register_module("stats_embed", Linear(2 * C, W, true));
  pos = register_module("pos", Embedding(o.max_patches() + 1, W));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < o.layers; ++l) blocks->push_back(SeriesEncoderBlock(o));
  ln_f = register_module("ln_f", LayerNorm(W, true, false, o.norm_eps));
  if (o.num_tokens > 0) {
    pool_queries = register_module("pool_queries", Embedding(o.num_tokens, W));
    pool_q = register_module("pool_q", Linear(W, W, true, fan_in_tag()));
    pool_kv = register_module("pool_kv", Linear(W, 2 * W, true, fan_in_tag()));
    pool_proj = register_module("pool_proj", Linear(W, W, true, fan_in_tag()));
  }
  proj_fc1 = register_module("proj_fc1", Linear(W, D, true, fan_in_tag()));
  if (o.projector == ProjectorKind::kVocabMix) {
    proj_vocab = register_module("proj_vocab", Linear(D, o.lm_vocab, true, fan_in_tag()));
  } else {
    proj_fc2 = register_module("proj_fc2", Linear(D, D, true, fan_in_tag()));
    proj_norm = register_module("proj_norm", LayerNorm(D, false, /*rms=*/true, o.norm_eps));
  }
  tags_ = collect_param_tags(*this);
  if (!init) return;
  torch::NoGradGuard no_grad;
  const double resid_std = o.init_std / std::sqrt(2.0 * std::max<int64_t>(o.layers, 1));
  for (auto& item : named_parameters()) {
    init_parameter(item.value(), tags_.at(item.key()).init, o.init_std, resid_std);
  }
}

EncodedSeries TemporalEncoderImpl::forward(const torch::Tensor& values,
                                           const torch::Tensor& valid) {
  const auto& o = options_;
  if (values.dim() != 3 || values.size(1) != o.channels || !valid.defined() ||
      valid.sizes() != values.sizes() || values.size(2) > o.max_length) {
    throw Error("temporal encoder: values and valid must be (B, " + std::to_string(o.channels) +
                ", L) with L <= " + std::to_string(o.max_length));
  }
  const auto norm = normalise_series(values, valid.to(torch::kBool));
  const auto patches = make_patches(norm.values, valid.to(torch::kBool), o);
  const int64_t B = values.size(0), P = patches.features.size(1);
  auto slog = torch::sign(norm.mean) * torch::log1p(norm.mean.abs());
  auto stats = stats_embed(torch::cat({slog, norm.std.log()}, -1)).unsqueeze(1);  // (B, 1, W)
  auto x = torch::cat({stats, patch_embed(patches.features)}, 1);                 // (B, 1+P, W)
  x = x + pos->weight.narrow(0, 0, P + 1);
  auto key_valid =
      torch::cat({torch::ones({B, 1}, patches.valid.options()), patches.valid}, 1);  // (B, 1+P)
  for (const auto& block : *blocks) x = block->as<SeriesEncoderBlockImpl>()->forward(x, key_valid);
  x = ln_f(x);
  EncodedSeries out;
  if (o.num_tokens > 0) {
    auto q = pool_q(pool_queries->weight).unsqueeze(0).expand({B, o.num_tokens, o.width});
    auto kv = pool_kv(x).chunk(2, -1);
    x = pool_proj(series_attention(q, kv[0], kv[1], key_valid, o.heads));  // (B, S, W)
    out.valid = torch::ones({B, o.num_tokens}, patches.valid.options());
  } else {
    // The patch tokens, then the stats token as it left the blocks: one token that attended to
    // every patch, where whole-series attributes (how many spikes, the trend) can be gathered
    // once instead of by the LM over P tokens.                           (B, P + 1, W)
    x = torch::cat({x.narrow(1, 1, P), x.narrow(1, 0, 1)}, 1);
    out.valid = torch::cat({patches.valid, torch::ones({B, 1}, patches.valid.options())}, 1);
  }
  auto h = torch::gelu(proj_fc1(x));  // (B, S, lm_width)
  if (o.projector == ProjectorKind::kVocabMix) {
    if (!vocab_table_.defined()) {
      throw Error(
          "temporal encoder: projector vocab_mix has no token-embedding table "
          "(set_vocab_table was not called)");
    }
    // (B, S, V) weights over the LM's words, softmax in fp32, then (B, S, V) @ (V, lm_width).
    auto weights = torch::softmax(proj_vocab(h).to(torch::kFloat), -1);
    const auto table = vocab_table_.detach();  // the LM's, frozen here: no gradient into it
    out.tokens = torch::matmul(weights.to(table.scalar_type()), table).to(h.scalar_type());
  } else {
    out.tokens = proj_norm(proj_fc2(h));
  }
  return out;
}

void TemporalEncoderImpl::set_output_rms(double rms) {
  // vocab_mix's soft tokens are mixes of the LM's embeddings: at its scale by construction.
  if (!proj_norm) return;
  torch::NoGradGuard no_grad;
  proj_norm->weight.fill_(rms);
}

void TemporalEncoderImpl::set_vocab_table(const torch::Tensor& wte) {
  if (wte.dim() != 2 || wte.size(0) != options_.lm_vocab || wte.size(1) != options_.lm_width) {
    throw Error("temporal encoder: the token-embedding table must be (" +
                std::to_string(options_.lm_vocab) + ", " + std::to_string(options_.lm_width) +
                "), got " + std::to_string(wte.dim()) + "-d");
  }
  vocab_table_ = wte;  // the parameter itself, not a detached copy of its storage (header)
}

double token_embedding_rms(const torch::Tensor& wte) {
  return token_embedding_rms(wte.size(0), wte.size(1),
                             [&](int64_t first, int64_t n) { return wte.narrow(0, first, n); });
}

double token_embedding_rms(
    int64_t rows, int64_t width,
    const std::function<torch::Tensor(int64_t first, int64_t n)>& read_rows) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (int64_t first = 0; first < rows; first += kEmbeddingRmsRows) {
    const int64_t n = std::min(kEmbeddingRmsRows, rows - first);
    sum += read_rows(first, n).to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return std::sqrt(sum / static_cast<double>(rows * width));
}

}  // namespace lmtrain::model::temporal
