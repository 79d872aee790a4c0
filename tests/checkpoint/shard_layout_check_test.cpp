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

nlohmann::json seed_layout() {
  std::ifstream in(testing::source_dir() + "/fuzz/corpus/meta_json/sharded_meta.json");
  return nlohmann::json::parse(in)["model_shards"];
}

// The message of the Error that damaging the seed layout with `edit` raises ("" if none).
std::string shard_error(const std::function<void(nlohmann::json&)>& edit) {
  auto s = seed_layout();
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

}  // namespace
}  // namespace lmtrain::train
