// The tensor-parallel plan's pieces as optim::SplitMatrices, for Muon under dist.tp
// (optim/muon.h): a matrix's pieces are all-gathered over the TP group and put together by the
// plan's slices (tensor_parallel_slice: c_attn's q, k and v rows, SwiGLU's gate and up rows
// are several ranges per rank), so Newton-Schulz sees exactly the matrix one process holds.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "distributed/group.h"
#include "model/gpt.h"
#include "optim/split_matrices.h"
#include "parallel/tensor_parallel_plan.h"

namespace lmtrain::parallel {

// `slices`: TensorParallel::slices(); `tp`: the TP group (outlives the result).
std::shared_ptr<optim::SplitMatrices> make_tp_split_matrices(
    const model::GptConfig& cfg, const std::map<std::string, TpSlice>& slices, dist::Group& tp);

// The whole tensor of parameter `name` from the TP ranks' pieces, in rank order (`pieces[r]`
// holds rank r's ranges of `s.dim`, concatenated).
at::Tensor assemble_tp_pieces(const model::GptConfig& cfg, const std::string& name,
                              const TpSlice& s, const std::vector<at::Tensor>& pieces);

}  // namespace lmtrain::parallel
