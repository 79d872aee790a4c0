// A tensor-parallel resume reads only its part of each tensor (checkpoint/sharded_reader.h):
// read_local_rows asks its reader for exactly the element ranges of this rank's rows (a dim-0
// cut), for blocks of whole rows one after the other (a cut along a later dim), or once for the
// whole tensor (held whole, or a tensor of another shape),
// and returns the part TensorParallel::local_piece would cut; own_saved_slice finds the slice
// a checkpoint saved for this TP rank only at the same TP degree, rank and ranges.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <utility>
#include <vector>

#include "checkpoint/sharded_reader.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Reads of a (6, 4) tensor 0..23 through read_local_rows, with the ranges it asked for.
struct RowsRead {
  at::Tensor got;
  Ranges asked;  // (begin, count)
};
RowsRead read_rows(const LocalRows& rows, std::vector<int64_t> shape = {6, 4},
                   int64_t block_elements = kLocalRowsBlockElements) {
  const auto whole = at::arange(24, at::kFloat).reshape(shape);
  RowsRead r;
  r.got = read_local_rows(
      shape, rows,
      [&](int64_t b, int64_t n) {
        r.asked.emplace_back(b, n);
        return whole.reshape({-1}).narrow(0, b, n).clone();
      },
      block_elements);
  return r;
}

TEST(LocalRows, ADimZeroCutReadsOnlyItsRowsAndALaterDimCutReadsBlocksOfWholeRows) {
  const auto whole = at::arange(24, at::kFloat).reshape({6, 4});
  // Rows 1 and 4..5 (two ranges, as c_attn's q and k parts): 4 and 8 elements, nothing else.
  auto r = read_rows({0, {{1, 2}, {4, 6}}, {6, 4}});
  EXPECT_EQ(r.asked, (Ranges{{4, 4}, {16, 8}}));
  EXPECT_TRUE(r.got.equal(at::cat({whole.narrow(0, 1, 1), whole.narrow(0, 4, 2)})));
  // Columns 2..3 (a row-parallel weight): within one block (4 MiB by default), one read of all
  // 24 elements, then the cut.
  r = read_rows({1, {{2, 4}}, {6, 4}});
  EXPECT_EQ(r.asked, (Ranges{{0, 24}}));
  EXPECT_TRUE(r.got.equal(whole.narrow(1, 2, 2)));
  // Blocks of 8 elements: two rows at a time, each block's columns kept before the next read;
  // two ranges of columns (0 and 2..3) concatenated in order; a block smaller than a row reads
  // one row at a time.
  r = read_rows({1, {{0, 1}, {2, 4}}, {6, 4}}, {6, 4}, 8);
  EXPECT_EQ(r.asked, (Ranges{{0, 8}, {8, 8}, {16, 8}}));
  EXPECT_TRUE(r.got.equal(at::cat({whole.narrow(1, 0, 1), whole.narrow(1, 2, 2)}, 1)));
  r = read_rows({1, {{1, 3}}, {6, 4}}, {6, 4}, 3);
  EXPECT_EQ(r.asked.size(), 6u);
  EXPECT_TRUE(r.got.equal(whole.narrow(1, 1, 2)));
  // A 3-D tensor cut along its last dim: blocks of dim-0 slabs.
  const auto cube = at::arange(24, at::kFloat).reshape({2, 3, 4});
  r = read_rows({2, {{1, 2}}, {2, 3, 4}}, {2, 3, 4}, 12);
  EXPECT_EQ(r.asked, (Ranges{{0, 12}, {12, 12}}));
  EXPECT_TRUE(r.got.equal(cube.narrow(2, 1, 1)));
  // Held whole, or saved with another shape than the model's: read whole, as it is.
  EXPECT_EQ(read_rows({}).asked, (Ranges{{0, 24}}));
  r = read_rows({0, {{0, 3}}, {6, 4}}, {4, 6});
  EXPECT_EQ(r.asked, (Ranges{{0, 24}}));
  EXPECT_EQ(r.got.sizes().vec(), (std::vector<int64_t>{4, 6}));
}

TEST(LocalRows, OwnSavedSliceOnlyAtTheSavingTpDegreeRankAndRanges) {
  std::ifstream in(testing::source_dir() + "/fuzz/corpus/meta_json/tp_sharded_meta.json");
  const auto meta = nlohmann::json::parse(in);
  const auto& w = meta["model_shards"]["tensors"][0];  // (4, 2), TP rank 1: rows 1 and 3
  const auto& b = meta["model_shards"]["tensors"][1];  // (4,), whole on every TP rank
  auto local = [](int64_t tp_rank, int64_t tp, LocalRows rows) {
    TensorLocalizer l;
    l.cut = [](const std::string&, const at::Tensor& t) { return t; };
    l.rows = [rows](const std::string& name) { return name == "w" ? rows : LocalRows{}; };
    l.tp_rank = tp_rank;
    l.tp = tp;
    return l;
  };
  const LocalRows rank1{0, {{1, 2}, {3, 4}}, {4, 2}};
  const auto* own = own_saved_slice(meta, w, "w", local(1, 2, rank1));
  ASSERT_NE(own, nullptr);
  EXPECT_EQ((*own)["tp_rank"], 1);
  EXPECT_EQ(own_saved_slice(meta, w, "w", local(1, 4, rank1)), nullptr);  // another degree
  EXPECT_EQ(own_saved_slice(meta, w, "w", local(0, 2, rank1)), nullptr);  // another rank's
  EXPECT_EQ(own_saved_slice(meta, w, "w", local(1, 2, {0, {{2, 4}}, {4, 2}})), nullptr);
  EXPECT_EQ(own_saved_slice(meta, b, "b", local(1, 2, rank1)), &b);  // whole, wanted whole
}

}  // namespace
}  // namespace lmtrain::train
