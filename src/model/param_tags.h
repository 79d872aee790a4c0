// Parameter tags: what the rest of the system needs to know about each parameter, set by the
// layer that registers it (not guessed later from its name). Initialisation, weight decay, the
// optimizer group (Muon takes the blocks' hidden matrices), and expert parallelism (which
// parameters are stacks of per-expert tensors, sharded over the EP group along dim 0) read them.
#pragma once
#include <torch/nn/module.h>

#include <map>
#include <string>

namespace lmtrain::model {

enum class InitRule {
  kNormal,        // N(0, init_std)
  kResidualProj,  // N(0, init_std / sqrt(2 n_layer)): projections that write into the residual
  kZero,
  kOne,
  kKaimingUniform,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): kaiming_uniform(a=sqrt(5)), LoRA's A
};

// The AdamW learning rate Muon gives a parameter outside its matrix group: the token and position
// embeddings take optim.embedding_lr, an untied output head optim.head_lr, the rest optim.lr.
enum class LrGroup { kBase, kEmbedding, kHead };

struct ParamTag {
  InitRule init = InitRule::kNormal;
  bool decay = true;          // AdamW weight decay applies
  bool block_matrix = false;  // a transformer block's 2-D weight matrix: the Muon group
  bool expert = false;        // (num_experts, ...) stack; dim 0 is the expert index
  // false: frozen (e.g. a LoRA base weight). Frozen parameters keep requires_grad=false, stay
  // out of optim::FlatParams (no gradient, optimizer state or gradient sync) and are not saved
  // in a training checkpoint (they come from the base checkpoint recorded in meta.json).
  bool trainable = true;
  bool lora = false;  // a LoRA adapter matrix (model/lora.h): not part of any base checkpoint
  LrGroup lr_group = LrGroup::kBase;
};

// Fills `p` (no grad) by `rule`: kNormal draws N(0, std), kResidualProj N(0, resid_std),
// kKaimingUniform U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = p.size(1); kZero, kOne.
void init_parameter(torch::Tensor& p, InitRule rule, double std, double resid_std);

// A transformer block's weight matrix: decayed, in Muon's group.
inline ParamTag block_matrix_tag(InitRule init = InitRule::kNormal) {
  ParamTag t;
  t.init = init;
  t.block_matrix = true;
  return t;
}

// Full parameter name ("transformer.h.0.mlp.c_fc.weight") -> tag.
using ParamTags = std::map<std::string, ParamTag>;

// A module whose parameters carry tags. Layers register through register_tagged(); modules that
// only hold submodules need not derive from it.
class TaggedModule : public torch::nn::Module {
 public:
  const std::map<std::string, ParamTag>& own_tags() const { return tags_; }
  // Freezes this module's own parameters (tag trainable=false, requires_grad=false).
  void freeze();

 protected:
  torch::Tensor register_tagged(const std::string& name, torch::Tensor tensor, ParamTag tag);

 private:
  std::map<std::string, ParamTag> tags_;
};

// Tags of every parameter under `root`, by full name. Throws lmtrain::Error naming a parameter
// that was registered without a tag (a layer that bypassed register_tagged).
ParamTags collect_param_tags(const torch::nn::Module& root);

}  // namespace lmtrain::model
