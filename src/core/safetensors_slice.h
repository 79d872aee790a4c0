// Reading part of one tensor of a safetensors file (core/safetensors.h) without reading the
// rest: the file is mapped and only the requested bytes are copied, so a rank that resumes
// from a sharded checkpoint (checkpoint/sharded_reader.h) touches only the pages it needs.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace lmtrain::core {

// Elements [begin, begin + count) of tensor `name`, flattened, as a fresh CPU tensor of the
// file's dtype; count < 0: the whole tensor in its shape. Throws lmtrain::Error naming the file
// and tensor when it is absent or the range is outside it.
at::Tensor read_safetensors_slice(const std::string& path, const std::string& name,
                                  int64_t begin = 0, int64_t count = -1);

}  // namespace lmtrain::core
