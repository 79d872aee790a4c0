// Reader and writer for the Hugging Face safetensors format:
//   [u64 LE header length N][N bytes JSON header, space padded][raw little-endian tensor data]
// Header: {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..],
//          "data_offsets": [begin, end]}, ...}, offsets relative to the start of the data.
// Used for model weights, optimizer state, and import/export of Hugging Face checkpoints.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors_header.h"

namespace lmtrain::core {

class Progress;

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes `tensors` (any device/layout; copied to contiguous CPU) in the given order, with an
// optional "__metadata__" map. Atomic: `path` gets the whole new file or keeps its old content.
// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. Names must be unique and non-empty.
// Note: transformers' from_pretrained expects metadata {"format": "pt"} in model files.
// `progress` (when given) is told the bytes of each tensor written.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       Progress* progress = nullptr);

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> names;  // file (data) order
  std::map<std::string, std::string> metadata;
};

// Parses and validates only the header (cheap; for listing and shape checks).
SafetensorsHeader read_safetensors_header(const std::string& path);

// Reads every tensor into freshly allocated CPU tensors. With `convert_floats_to`, floating
// point tensors are converted to that dtype (integer and bool tensors are left alone: they
// hold counters and masks that must not change meaning). Throws lmtrain::Error naming the file
// (and tensor) for a truncated file, malformed header, overlapping or out-of-bounds offsets,
// a size that disagrees with shape x dtype, or an unsupported dtype. `progress` (when given) is
// told the bytes of each tensor read.
SafetensorsFile read_safetensors(const std::string& path,
                                 std::optional<at::ScalarType> convert_floats_to = std::nullopt,
                                 Progress* progress = nullptr);

// The format's dtype name for a torch dtype ("F32", ...); throws for unsupported dtypes.
std::string safetensors_dtype_name(at::ScalarType dtype);

}  // namespace lmtrain::core
