// The model's initial weights written parameter by parameter, in the order the CPU generator
// is consumed, through a writer: in place (GptImpl::init_weights), or (ZeRO-3's sharded set-up,
// parallel/sharded_init.h) into a scratch tensor of one parameter whose part in this rank's
// shard is kept, so no rank ever holds the whole model. Either way the same draws of the same
// generator in the same order give the same values, bit for bit.
//
// Order (GptImpl::init_weights' since the start): every trainable parameter in
// named_parameters() order by its tag's InitRule (an expert-parallel rank draws the whole stack
// of every expert and keeps its own); the MoE expert biases (buffers) zeroed; nanochat's parts
// (resid / x0 lambdas, smear gate, backout, value embeddings); the blocks' value-embedding
// gates, drawn a second time (nanochat's uniform(0, 0.02)).
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

namespace lmtrain::model {

class GptImpl;
class NanochatPartsImpl;
struct GptConfig;

// Draws a parameter's initial values into `values` (the parameter's shape, CPU, fp32).
using InitFill = std::function<void(at::Tensor& values)>;
// Called once per write, in generator order, with the parameter's full name and the model's
// tensor (unwritten under the sharded set-up: read its shape, never its values). A parameter
// may be written twice (a value-embedding gate): the later write wins.
using InitWriter =
    std::function<void(const std::string& name, at::Tensor& param, const InitFill& fill)>;

// The writer of an ordinary build: fill(param) in place.
void write_in_place(const std::string& name, at::Tensor& param, const InitFill& fill);

// The base's parameters, every one of them (a frozen one too: the whole-model init runs in the
// constructor, before LoRA freezes the base), LoRA adapters left out.
void init_model_weights(GptImpl& model, const InitWriter& write);
// The LoRA adapters, in the order apply_lora attaches and draws them (registration order):
// lora_A kaiming-uniform (bound 1 / sqrt(in)), lora_B zero. After the base, as build_model.
void init_lora_adapter_weights(GptImpl& model, const InitWriter& write);
// nanochat's parts alone; their names prefixed with `prefix` ("nanochat." in the model).
void init_nanochat_weights(NanochatPartsImpl& parts, const GptConfig& cfg,
                           const std::string& prefix, const InitWriter& write);

}  // namespace lmtrain::model
