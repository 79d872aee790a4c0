// `lmtrain lora merge` and `lmtrain export peft`: what a LoRA run's checkpoint becomes outside a
// LoRA run (checkpoint/lora_checkpoint.h describes the checkpoint).
#pragma once
#include <string>

namespace lmtrain::train {

// Writes an ordinary checkpoint into run dir `out_dir` (checkpoints/step_N, latest,
// config.yaml) whose weights are the base's with every adapter folded in
// (W[rows] += alpha / rank * B A) and whose config has lora.rank = 0: loadable by generate, eval,
// export hf and model.init_from. Returns the checkpoint dir. out_dir is written through
// core::OutputDir: the LoRA run and its base are never written, an existing out_dir is refused
// unless `overwrite` (which moves its content aside).
std::string merge_lora(const std::string& checkpoint_spec, const std::string& out_dir,
                       bool overwrite);

// Writes out_dir/{adapter_config.json, adapter_model.safetensors} for
// peft.PeftModel.from_pretrained(<the `lmtrain export hf` of the base>, out_dir). Names:
//   gpt2:        transformer.h.N.{attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj}, lm_head
//                (Conv1D: fan_in_fan_out = true; lora_A (r, in) and lora_B (out, r) as for a
//                Linear). PEFT adapts the fused c_attn as one module, so the q/k/v adapters
//                become one of rank n * r (n = targets among q, k, v): A = [A_q; A_k; A_v],
//                B = block-diagonal in c_attn's [q; k; v] rows (zero rows for untargeted
//                parts), with rank_pattern / alpha_pattern {c_attn: n r / n alpha} so the
//                scaling stays alpha / r: the same B A x, exactly.
//   llama/qwen:  model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, lm_head:
//                one PEFT adapter per lmtrain adapter, as is.
// out_dir is written through core::OutputDir, as for merge_lora.
void export_peft(const std::string& checkpoint_spec, const std::string& out_dir, bool overwrite);

}  // namespace lmtrain::train
