// Dropout under a split (model/dropout.h, DropoutSplit): each of `parts` ranks holding a dim-1
// piece of one process's activation draws the whole mask from the scope's seed and keeps its
// piece, so the pieces put together are exactly the one-process dropout, on the CPU's generator
// and on CUDA's Philox generator alike (the GPU variant skips where no GPU is visible).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/runtime.h"
#include "model/dropout.h"

namespace lmtrain::model {
namespace {

// dropout(x) of one process, and its `parts` pieces dropped under the split, concatenated
// along dim 1: equal element for element.
void check_pieces_make_the_whole(const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const double p = 0.3;
  const uint64_t seed = 1234;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{2, 8, 16}, {2, 4, 6, 6}}) {
    auto x = torch::rand(shape, torch::TensorOptions().device(device)) + 1.0;  // no zeros
    at::Tensor whole;
    {
      ScopedDropoutSeed scope(seed);
      whole = dropout(x, p);
    }
    for (const int parts : {2, 4}) {
      const int64_t n = x.size(1) / parts;
      std::vector<at::Tensor> pieces;
      for (int part = 0; part < parts; ++part) {
        ScopedDropoutSeed scope(seed, DropoutSplit{parts, part});
        pieces.push_back(dropout(x.narrow(1, part * n, n), p));
      }
      const auto joined = torch::cat(pieces, 1);
      EXPECT_TRUE(torch::equal(joined, whole)) << "parts " << parts << " shape " << x.sizes();
    }
    // A real draw: about p of the elements dropped, the rest scaled by 1 / (1 - p).
    const double dropped = (whole == 0).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(dropped, p, 0.15) << x.sizes();
    const auto kept = whole != 0;
    EXPECT_TRUE(torch::allclose(whole.masked_select(kept), (x / (1 - p)).masked_select(kept)));
  }
}

TEST(DropoutSplit, PiecesDroppedUnderTheSplitMakeTheOneProcessDropout) {
  check_pieces_make_the_whole(torch::kCPU);
}

// dropout_part along the last dim (a row-parallel LoRA adapter's input features, parallel/
// tp_lora.h), inside a scope split along dim 1 that it ignores: the pieces make the whole; and
// a whole input under that scope ({1, 0}) gets one process's mask.
TEST(DropoutSplit, PartsAlongTheLastDimMakeTheOneProcessDropoutWhateverTheScope) {
  torch::NoGradGuard no_grad;
  const double p = 0.3;
  auto x = torch::rand({2, 6, 8}) + 1.0;
  at::Tensor whole;
  {
    ScopedDropoutSeed scope(7);
    whole = dropout(x, p);
  }
  std::vector<at::Tensor> pieces;
  for (int part = 0; part < 2; ++part) {
    {
      ScopedDropoutSeed scope(7, DropoutSplit{2, part});
      pieces.push_back(dropout_part(x.narrow(-1, part * 4, 4), p, -1, DropoutSplit{2, part}));
    }
    ScopedDropoutSeed scope(7, DropoutSplit{2, part});
    EXPECT_TRUE(torch::equal(dropout_part(x, p, 1, {}), whole)) << "part " << part;
  }
  EXPECT_TRUE(torch::equal(torch::cat(pieces, -1), whole));
}

TEST(CudaDropoutSplit, PiecesDroppedUnderTheSplitMakeTheOneProcessDropout) {
  if (!core::cuda_available()) GTEST_SKIP() << "no GPU visible to libtorch";
  check_pieces_make_the_whole(torch::kCUDA);
}

}  // namespace
}  // namespace lmtrain::model
