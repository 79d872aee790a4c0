// `lmtrain train --help-models`: every preset in configs/ with its architecture and the parameter
// count of the model built from it.
#pragma once
#include <string>

namespace lmtrain::cli {

// The configs/ directory: ./configs when it exists, else the one beside the binary's source
// tree (<exe dir>/../configs). Empty when neither exists.
std::string find_configs_dir();

// One line per preset: file name, parameter count (from the built, uninitialised model; vocab
// 50304 when the preset leaves it to the tokenizer) and the model description.
std::string describe_presets(const std::string& configs_dir);

}  // namespace lmtrain::cli
