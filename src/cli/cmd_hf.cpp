// `lmtrain import hf DIR --output RUN_DIR`, `lmtrain export hf CHECKPOINT DIR` and
// `lmtrain export peft --checkpoint PATH --output DIR` (interop/lora_export.h).
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "interop/hf_checkpoint.h"
#include "interop/lora_export.h"

namespace lmtrain::cli {

int cmd_import(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"output", FlagKind::kValue, "run directory to create the checkpoint in", "RUN_DIR"},
      overwrite_flag(),
      quiet_flag(),
  };
  const auto args = parse_args("import", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain import hf HF_DIR --output RUN_DIR\n\n"
          "Converts a Hugging Face model directory (config.json, model.safetensors or a\n"
          "sharded model.safetensors.index.json, tokenizer.json) of a gpt2, llama, qwen2,\n"
          "qwen3, qwen3_moe or mixtral model into an lmtrain checkpoint at\n"
          "RUN_DIR/checkpoints/latest. RUN_DIR/config.yaml is ready to fine-tune from it:\n"
          "`lmtrain train --config RUN_DIR/config.yaml --data.dir=DATA` starts from the\n"
          "imported weights (model.init_from) and writes RUN_DIR-finetune (run.dir), one\n"
          "epoch unless told otherwise. Sample with `lmtrain generate`. An existing\n"
          "RUN_DIR is refused unless --overwrite (it is then moved aside, never deleted).\n"
          "\n")) {
    return 0;
  }
  apply_quiet(args);
  if (args.positional.size() != 2 || args.positional[0] != "hf") {
    throw UsageError("usage: lmtrain import hf HF_DIR --output RUN_DIR");
  }
  if (!args.has("output")) throw UsageError("import: --output RUN_DIR is required");
  const auto r =
      train::import_hf(args.positional[1], args.get("output"), args.get_bool("overwrite"));
  std::cout << "imported " << r.model_description << "\n"
            << "checkpoint: " << r.checkpoint_dir << "\n"
            << "config: " << args.get("output") << "/config.yaml\n";
  if (!r.has_tokenizer) std::cout << "(no tokenizer.json in " << args.positional[1] << ")\n";
  return 0;
}

int cmd_export(const Args& argv) {
  const std::vector<FlagSpec> flags = {
      {"checkpoint", FlagKind::kValue, "export peft: a LoRA run's checkpoint (or run dir)", "PATH"},
      {"output", FlagKind::kValue, "export peft: directory for the adapter files", "DIR"},
      overwrite_flag(),
      quiet_flag(),
  };
  const auto args = parse_args("export", argv, flags, /*accept_config=*/false);
  if (print_help_if_asked(
          args, flags,
          "Usage: lmtrain export hf CHECKPOINT OUT_DIR\n"
          "       lmtrain export peft --checkpoint PATH --output DIR\n\n"
          "hf: writes OUT_DIR/{config.json, model.safetensors, tokenizer.json} for Hugging\n"
          "Face transformers (AutoModelForCausalLM.from_pretrained(OUT_DIR)). The model\n"
          "must be a gpt2, llama, qwen2, qwen3, qwen3_moe or mixtral (model.arch and\n"
          "matching options; a llama or qwen3 with MoE layers, e.g. configs/moe-tiny.yaml,\n"
          "exports as mixtral or qwen3_moe). An OUT_DIR that holds files is refused unless\n"
          "--overwrite (they are moved aside into OUT_DIR/previous-<n>/).\n"
          "peft: writes DIR/{adapter_config.json, adapter_model.safetensors} of a LoRA\n"
          "run's adapters, for peft.PeftModel.from_pretrained(base, DIR) where base is the\n"
          "`export hf` of the run's base (gpt2: q/k/v adapters become one c_attn adapter\n"
          "of rank n*r with the same product).\n\n")) {
    return 0;
  }
  apply_quiet(args);
  if (!args.positional.empty() && args.positional[0] == "peft") {
    const std::string ckpt =
        args.positional.size() > 1 ? args.positional[1] : args.get("checkpoint");
    const std::string out = args.positional.size() > 2 ? args.positional[2] : args.get("output");
    if (ckpt.empty() || out.empty() || args.positional.size() > 3) {
      throw UsageError("usage: lmtrain export peft --checkpoint PATH --output DIR");
    }
    train::export_peft(ckpt, out, args.get_bool("overwrite"));
    std::cout << "exported the LoRA adapters of " << ckpt << " to " << out << "\n";
    return 0;
  }
  if (args.positional.size() != 3 || args.positional[0] != "hf") {
    throw UsageError("usage: lmtrain export hf CHECKPOINT OUT_DIR");
  }
  train::export_hf(args.positional[1], args.positional[2], args.get_bool("overwrite"));
  std::cout << "exported " << args.positional[1] << " to " << args.positional[2] << "\n";
  return 0;
}

}  // namespace lmtrain::cli
