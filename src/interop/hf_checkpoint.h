// `lmtrain import hf` / `lmtrain export hf`: Hugging Face model directories (config.json,
// model.safetensors or a sharded model.safetensors.index.json, tokenizer.json) to and from
// lmtrain checkpoints. The weight-name mapping is interop/hf_format.h.
#pragma once
#include <string>

namespace lmtrain::train {

struct ImportResult {
  std::string checkpoint_dir;
  std::string model_description;
  bool has_tokenizer = false;
};

// Reads the HF directory `hf_dir` and writes an lmtrain checkpoint (step 0) into run_dir
// (run_dir/checkpoints/step_00000000, `latest`, run_dir/config.yaml) through core::OutputDir:
// an existing run_dir is refused unless `overwrite` (then its content is moved aside), hf_dir
// never. Errors name the file, tensor or unsupported option.
ImportResult import_hf(const std::string& hf_dir, const std::string& run_dir, bool overwrite);

// Writes config.json (read alike by transformers 4.x and 5.x), model.safetensors (HF names) and,
// when the checkpoint has one, tokenizer.json + tokenizer_config.json into out_dir, for
// transformers' AutoModelForCausalLM / AutoTokenizer.from_pretrained. out_dir is written
// through core::OutputDir (refused if it overlaps the checkpoint, or holds anything unless
// `overwrite`, which moves that aside).
void export_hf(const std::string& checkpoint_spec, const std::string& out_dir, bool overwrite);

}  // namespace lmtrain::train
