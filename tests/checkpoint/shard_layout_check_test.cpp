// meta.json's "model_shards" structure check (checkpoint/shard_layout_check.h): a layout as the
// sharded save writes it passes; each kind of damage is an lmtrain::Error naming the entry.
#include "checkpoint/shard_layout_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::train {
namespace {

// A fuzz seed's layout: ZeRO-3's (sharded_meta.json) or tensor parallelism's
// (tp_sharded_meta.json: TP=2, a tensor split into two ranges per TP rank, one held whole;
// tp_muon_meta.json: the same with Muon's optimizer files by name).
nlohmann::json seed_layout(const std::string& seed) {
  std::ifstream in(testing::source_dir() + "/fuzz/corpus/meta_json/" + seed);
  return nlohmann::json::parse(in)["model_shards"];
}

// The message of the Error that damaging the seed layout with `edit` raises ("" if none).
std::string shard_error(const std::function<void(nlohmann::json&)>& edit,
                        const std::string& seed = "sharded_meta.json") {
  auto s = seed_layout(seed);
  edit(s);
  try {
    check_model_shards(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShardLayoutCheck, TheSavedShapePassesAndDamageIsNamed) {
  EXPECT_EQ(shard_error([](nlohmann::json&) {}), "");
  const struct {
    std::function<void(nlohmann::json&)> edit;
    const char* named;
  } cases[] = {
      {[](auto& s) { s["files"][1]["file"] = "../model.rank1.safetensors"; },
       "names '../model.rank1.safetensors', which is not a file of the checkpoint"},
      {[](auto& s) { s["tensors"][2]["file"] = "/etc/passwd"; },
       "tensor 'mask' names '/etc/passwd'"},
      {[](auto& s) {
         s["files"][0]["flat"] = {3, 1};
       },
       "file model.rank0.safetensors's flat range [3, 1)"},
      {[](auto& s) {
         s["files"][2]["flat"] = {4, 9};
       },
       "outside the flat layout of 8 elements"},
      {[](auto& s) {
         s["tensors"][0]["shape"] = {3, 3};
       },
       "tensor 'w''s flat range does not hold its shape"},
      {[](auto& s) {
         s["tensors"][0]["shape"] = {4611686018427387904LL, 4};
       },
       "tensor 'w''s flat range does not hold its shape"},
      {[](auto& s) { s["tensors"][1]["shape"] = {-2}; }, "tensor 'b' has a dimension"},
      {[](auto& s) { s["files"][1]["rank"] = 2; }, "file model.rank1.safetensors has rank 2"},
      {[](auto& s) { s["files"][1]["rank"] = "1"; }, "has no integer \"rank\""},
      {[](auto& s) { s["world_size"] = 0; }, "world_size < 1"},
      {[](auto& s) { s.erase("flat_numel"); }, "it has no integer \"flat_numel\""},
      {[](auto& s) { s["tensors"] = 7; }, "needs the arrays"},
      {[](auto& s) { s["files"][0]["tensors"] = {1}; }, "a tensor name that is not a string"},
      {[](auto& s) { s["tensors"][0].erase("name"); }, "a tensor entry has no string \"name\""},
  };
  for (const auto& c : cases) {
    const std::string message = shard_error(c.edit);
    EXPECT_NE(message.find(c.named), std::string::npos)
        << "wanted: " << c.named << "\ngot: " << message;
    EXPECT_NE(message.find("meta.json's model_shards: "), std::string::npos) << message;
  }
}

TEST(ShardLayoutCheck, TensorParallelSlicesPassAndDamageIsNamed) {
  const std::string seed = "tp_sharded_meta.json";
  EXPECT_EQ(shard_error([](nlohmann::json&) {}, seed), "");
  const struct {
    std::function<void(nlohmann::json&)> edit;
    const char* named;
  } cases[] = {
      {[](auto& s) { s["files"][2]["tp_rank"] = 2; },
       "file model.rank1.safetensors has tp_rank 2 outside [0, 2)"},
      {[](auto& s) { s["files"][2]["tp_rank"] = "1"; },
       "file model.rank1.safetensors has no integer \"tp_rank\""},
      {[](auto& s) { s["tp"] = 3; }, "tp 3 is not in [1, world_size]"},
      {[](auto& s) { s["tensors"][0]["slices"][1]["tp_rank"] = -1; },
       "tensor 'w''s slice has tp_rank -1"},
      {[](auto& s) {
         s["tensors"][0]["slices"][1]["ranges"] = {{0, 1}, {3, 4}};
       },
       "tensor 'w''s slices do not cover dimension 0 exactly once"},
      {[](auto& s) {
         s["tensors"][0]["slices"][1]["ranges"] = {{1, 2}, {3, 5}};
       },
       "tensor 'w''s slice range [3, 5) is outside dimension 0 of 4"},
      {[](auto& s) {
         s["tensors"][0]["slices"][0]["flat"] = {0, 3};
       },
       "tensor 'w''s slice's flat range does not hold its ranges"},
      {[](auto& s) {
         s["tensors"][0]["slices"][0]["flat"] = {6, 10};
       },
       "tensor 'w''s slice's flat range [6, 10) is outside the flat layout of 8"},
      {[](auto& s) { s["tensors"][0]["slices"][0]["dim"] = 2; },
       "tensor 'w''s slice cuts dimension 2 of a 2-d shape"},
      {[](auto& s) { s["tensors"][0]["slices"][1]["dim"] = 1; },
       "tensor 'w''s slices cut different dims"},
      {[](auto& s) { s["tensors"][0]["slices"] = 5; }, "tensor 'w''s \"slices\" is not a list"},
      {[](auto& s) { s["tensors"][0]["slices"][0].erase("ranges"); },
       "tensor 'w''s slice has no \"ranges\""},
      {[](auto& s) { s["tensors"][1]["segment"] = 4; }, "tensor 'b''s \"segment\" is not a string"},
  };
  for (const auto& c : cases) {
    const std::string message = shard_error(c.edit, seed);
    EXPECT_NE(message.find(c.named), std::string::npos)
        << "wanted: " << c.named << "\ngot: " << message;
    EXPECT_NE(message.find("meta.json's model_shards: "), std::string::npos) << message;
  }
}

// Muon under TP (tp_muon_meta.json): its optimizer files hold state by name, no flat range.
TEST(ShardLayoutCheck, OptimizerStateByNamePassesAndDamageIsNamed) {
  const std::string seed = "tp_muon_meta.json";
  EXPECT_EQ(shard_error([](nlohmann::json&) {}, seed), "");
  const struct {
    std::function<void(nlohmann::json&)> edit;
    const char* named;
  } cases[] = {
      {[](auto& s) { s["files"][3]["by_name"] = false; },
       "file optim.rank1.safetensors's \"by_name\" is not true"},
      {[](auto& s) { s["files"][3]["by_name"] = "yes"; },
       "file optim.rank1.safetensors's \"by_name\" is not true"},
      {[](auto& s) { s["files"][3]["tp_rank"] = 2; },
       "file optim.rank1.safetensors has tp_rank 2 outside [0, 2)"},
      {[](auto& s) { s["files"][3]["file"] = "../optim.rank1.safetensors"; },
       "names '../optim.rank1.safetensors', which is not a file of the checkpoint"},
      {[](auto& s) { s["files"][1].erase("by_name"); },
       "file optim.rank0.safetensors lists no tensors"},
  };
  for (const auto& c : cases) {
    const std::string message = shard_error(c.edit, seed);
    EXPECT_NE(message.find(c.named), std::string::npos)
        << "wanted: " << c.named << "\ngot: " << message;
  }
}

}  // namespace
}  // namespace lmtrain::train
