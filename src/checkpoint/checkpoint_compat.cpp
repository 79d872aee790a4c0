// Whether a checkpoint fits this run's model (checkpoint/training_checkpoint.h): the shapes
// its recorded config resolves to against the config's.
#include "checkpoint/checkpoint_config.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "options/read_model.h"

namespace lmtrain::train {

int64_t checkpoint_seq_len(const LoadedCheckpoint& ckpt) {
  return checkpoint_config(ckpt).get_int("data.seq_len");
}

model::ModelOptions checkpoint_model_options(const LoadedCheckpoint& ckpt) {
  return options::read_model_options(checkpoint_config(ckpt), 0);
}

namespace {

// "4 on q,v (unfreeze: norms)": what the adapters' shapes and the trained base groups depend on.
std::string lora_shape(const model::LoraOptions& lora) {
  std::string unfreeze;
  const std::pair<bool, const char*> groups[] = {{lora.unfreeze_norms, "norms"},
                                                 {lora.unfreeze_embeddings, "embeddings"},
                                                 {lora.unfreeze_head, "head"}};
  for (const auto& [on, name] : groups) {
    if (on) unfreeze += (unfreeze.empty() ? "" : ",") + std::string(name);
  }
  return std::to_string(lora.rank) + " on " + model::lora_target_list(lora.targets) +
         " (unfreeze: " + unfreeze + ")";
}

}  // namespace

void check_model_compatible(const LoadedCheckpoint& ckpt, const model::ModelOptions& model) {
  // Compare the architectures the two resolve to (so mlp_hidden 0 and 4 * n_embd, or a
  // depth-sized nanochat and its explicit shape, agree); dropout, init and init_from may differ.
  const auto saved = checkpoint_model_options(ckpt);
  const auto& a = saved.shape;
  auto b = model.shape;
  if (b.vocab_size == 0) b.vocab_size = a.vocab_size;
  std::string diffs;
  auto cmp = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y)
      diffs += std::string("\n  model.") + key + ": checkpoint has " + x + ", config has " + y;
  };
  auto n = [](auto v) { return c10::str(v); };
  cmp("n_layer", n(a.n_layer), n(b.n_layer));
  cmp("n_embd", n(a.n_embd), n(b.n_embd));
  cmp("n_head", n(a.n_head), n(b.n_head));
  cmp("n_kv_head", n(a.kv_heads()), n(b.kv_heads()));
  cmp("head_dim", n(a.head_dim()), n(b.head_dim()));
  cmp("mlp_hidden", n(a.hidden_dim()), n(b.hidden_dim()));
  cmp("vocab_size", n(a.vocab_size), n(b.vocab_size));
  if (a.learned_pos() || b.learned_pos()) cmp("block_size", n(a.block_size), n(b.block_size));
  cmp("norm", core::to_string(a.norm), core::to_string(b.norm));
  cmp("pos", core::to_string(a.pos), core::to_string(b.pos));
  cmp("mlp", core::to_string(a.mlp), core::to_string(b.mlp));
  cmp("bias", n(a.bias), n(b.bias));
  cmp("qkv_bias", n(a.qkv_bias), n(b.qkv_bias));
  cmp("qk_norm", n(a.qk_norm), n(b.qk_norm));
  cmp("tie_embeddings", n(a.tie_embeddings), n(b.tie_embeddings));
  cmp("rope_theta", n(a.rope_theta), n(b.rope_theta));
  cmp("rope_scaling", model::describe_rope(a.rope_params()), model::describe_rope(b.rope_params()));
  cmp("windows", model::describe_windows(a), model::describe_windows(b));
  cmp("logit_softcap", n(a.logit_softcap), n(b.logit_softcap));
  cmp("moe.num_experts", n(a.moe.num_experts), n(b.moe.num_experts));
  if (a.moe.enabled() && b.moe.enabled()) {
    cmp("moe.expert_hidden", n(a.moe.expert_hidden), n(b.moe.expert_hidden));
    cmp("moe.shared_experts", n(a.moe.shared_experts), n(b.moe.shared_experts));
    cmp("moe.every", n(a.moe.every), n(b.moe.every));
    cmp("moe.dense_layers", n(a.moe.moe_layers(a.n_layer)), n(b.moe.moe_layers(b.n_layer)));
  }
  // LoRA: the adapters must have the shapes the checkpoint holds (a fresh run from a base
  // compares only the model; the base has no lora keys set).
  if (saved.lora.enabled() && lora_shape(saved.lora) != lora_shape(model.lora)) {
    diffs += "\n  lora.rank on lora.targets (lora.unfreeze): checkpoint has " +
             lora_shape(saved.lora) + ", config has " + lora_shape(model.lora);
  }
  if (!diffs.empty()) {
    throw UsageError("checkpoint " + ckpt.dir +
                     " is incompatible with this config (different model shape):" + diffs);
  }
}

}  // namespace lmtrain::train
