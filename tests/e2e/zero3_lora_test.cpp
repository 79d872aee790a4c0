// LoRA under ZeRO-3 (dist.zero=3) with real processes over Gloo: the frozen base is sharded
// per unit like the trained parameters (parallel/frozen_shard.h), so 2 ranks equal ZeRO-2 on 2
// ranks bit for bit (an all-gather does no arithmetic), one process within float tolerance; a
// resume in the same layout is bitwise; each rank holds ~1/2 of the base by the run's byte
// accounting; the sharded adapter checkpoint merges as ZeRO-2's does. The resume takes the
// sharded set-up (the adapters by range into the shards, the base by range into FrozenShard). One
// launch of each kind on a 2-layer model.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/sha256.h"
#include "e2e/corpus.h"
#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(Zero3LoraTest, ShardedBaseEqualsZero2BitwiseOneProcessWithinToleranceAndResumes) {
  TempDir dir("lmtrain_zero3_lora");
  const std::string data = prepare_synthetic_data(dir.path());
  const std::string model = tiny_train_flags() + " --model.tie_embeddings=false --data.dir=" + data;
  const std::string base = dir.file("base");
  auto b = run_command(lmtrain_binary() + " train" + model + " --run.dir=" + base +
                       " --train.max_steps=6");
  ASSERT_EQ(b.exit_code, 0) << b.output;

  // Adapters on every target (the head's in the root unit), the norms trained whole beside
  // them; 24 windows of 32 tokens per step, 2 micro-steps of accumulation at both world sizes,
  // blocks recomputed in backward (the frozen weights gathered again for the recompute).
  // optim.eps=1e-6: see ddp_test.cpp.
  auto lora = [&](const std::string& name, int ranks, const std::string& extra) {
    const std::string run = dir.file(name);
    auto r = run_command(lmtrain_on_ranks(
        ranks, "train" + model + " --run.dir=" + run + " --model.init_from=" + base +
                   " --lora.rank=4 --lora.alpha=8 --lora.targets=q,k,v,o,mlp_in,mlp_out,head"
                   " --lora.unfreeze=norms --optim.lr=1e-2 --optim.eps=1e-6 --train.max_steps=8"
                   " --train.total_batch_size=768 --train.activation_checkpointing=block"
                   " --train.grad_clip=0.1 --dist.bucket_mb=0.02 --train.micro_batch_size=" +
                   std::to_string(12 / ranks) + extra));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::make_pair(run, r.output);
  };
  const auto [one, one_out] = lora("one", 1, "");
  const auto [z2, z2_out] = lora("z2", 2, " --dist.zero=2");
  const auto [z3, z3_out] = lora("z3", 2, " --dist.zero=3");
  EXPECT_NE(z3_out.find("ZeRO-3: 3 units (root + 2 blocks) sharded over 2 ranks"),
            std::string::npos)
      << z3_out;

  const std::string z2c = z2 + "/checkpoints/latest", z3c = z3 + "/checkpoints/latest";
  EXPECT_EQ(max_param_rel_diff(z3c, z2c), 0.0);
  EXPECT_EQ(max_param_rel_diff(z3c, z2c, "optim.rank0.safetensors"), 0.0);
  EXPECT_EQ(logged_losses(z3), logged_losses(z2));
  ASSERT_EQ(logged_losses(z3).size(), 8u);
  expect_run_matches(z3, one, 1e-6, 1e-5);
  // Still an adapter checkpoint (the base by reference), saved as shards without a gather.
  EXPECT_TRUE(fs::exists(z3c + "/model.rank1.safetensors"));
  EXPECT_NE(read_text(z3c + "/meta.json").find("\"lora_base\""), std::string::npos);

  // The frozen base per rank: all of it under ZeRO-2, half of it (and the units' padding to
  // 16 x 2 elements) under ZeRO-3.
  const int64_t whole = logged_count(z2_out, "frozen_bytes_per_rank");
  const int64_t held = logged_count(z3_out, "frozen_bytes_per_rank");
  ASSERT_GT(whole, 0) << z2_out;
  EXPECT_EQ(logged_count(z3_out, "frozen_bytes_whole"), whole) << z3_out;
  EXPECT_GE(held, whole / 2) << z3_out;
  EXPECT_LE(held, whole / 2 * 1.05) << z3_out;
  // `lmtrain plan` prices the frozen base as each layout holds it (within 10%).
  for (const auto& [zero, measured] : {std::pair{"2", whole}, std::pair{"3", held}}) {
    auto p = run_command(lmtrain_binary() + " plan" + model +
                         " --lora.rank=4 --lora.targets=q,k,v,o,mlp_in,mlp_out,head"
                         " --lora.unfreeze=norms --train.total_batch_size=0"
                         " --train.micro_batch_size=6 --nproc 2 --dist.zero=" +
                         zero);
    ASSERT_EQ(p.exit_code, 0) << p.output;
    const auto planned = static_cast<double>(logged_count(p.output, "frozen_bytes_per_rank"));
    EXPECT_NEAR(planned, static_cast<double>(measured), 0.1 * static_cast<double>(measured))
        << "dist.zero=" << zero << "\n"
        << p.output;
  }

  // A resume in the same layout, from the sharded adapter checkpoint of step 4.
  const std::string resumed = lora("z3_resumed", 2, " --dist.zero=3 --train.stop_at_step=4").first;
  const auto second_out = lora("z3_resumed", 2, " --dist.zero=3 --resume=auto").second;
  // Through the sharded set-up: the adapters and their moments read by range into each
  // rank's shard, the frozen base's pieces read by range from the base it records.
  EXPECT_NE(second_out.find("ZeRO-3 sharded set-up: the model built unwritten"), std::string::npos)
      << second_out;
  EXPECT_NE(second_out.find("(this rank's shard only, read by range)"), std::string::npos)
      << second_out;
  const std::string rc = resumed + "/checkpoints/latest";
  EXPECT_EQ(max_param_rel_diff(rc, z3c), 0.0);
  EXPECT_EQ(max_param_rel_diff(rc, z3c, "optim.rank1.safetensors"), 0.0);
  EXPECT_EQ(logged_losses(resumed), logged_losses(z3));

  // bf16 runs gather the blocks' frozen linear weights in bf16 (parallel/frozen_shard.h), as
  // the trained ones: still ZeRO-2's bits, and half the bytes for them. Per step the blocks
  // are gathered 7 times: 2 micro-steps x (forward, backward) x 2 blocks, less one, as block
  // 0's input (the frozen embeddings' output) has no gradient to end its backward, so it stays
  // gathered until the next micro-step's forward has used it. Each time the other rank's half
  // of a block's 12288 matrix elements comes 2 bytes smaller: 7 x 6144 x 2 = 86016 bytes less
  // than the fp32 run's all-gathers (the adapters' broadcasts alike).
  const std::string bf16 = " --train.precision=bf16 --train.max_steps=3";
  const std::string b2 = lora("bf16_z2", 2, bf16 + " --dist.zero=2").first;
  const std::string b3 = lora("bf16_z3", 2, bf16 + " --dist.zero=3").first;
  EXPECT_EQ(max_param_rel_diff(b3 + "/checkpoints/latest", b2 + "/checkpoints/latest"), 0.0);
  EXPECT_EQ(logged_losses(b3), logged_losses(b2));
  const auto fp32 = step_records(z3), low = step_records(b3);
  ASSERT_EQ(low.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    const auto &a = fp32[i]["comm_bytes"], &b = low[i]["comm_bytes"];
    EXPECT_EQ(a["all_gather"].get<int64_t>() - b["all_gather"].get<int64_t>(), 86016)
        << a.dump() << "\n"
        << b.dump();
    EXPECT_EQ(a["broadcast"], b["broadcast"]);
  }

  // lora merge reads the shards (base by reference + adapters and norms): the same merged
  // weights as from ZeRO-2's checkpoint.
  for (const std::string name : {"z2", "z3"}) {
    auto m = run_command(lmtrain_binary() + " lora merge --checkpoint " + dir.file(name) +
                         " --output " + dir.file("merged_" + name));
    ASSERT_EQ(m.exit_code, 0) << m.output;
  }
  EXPECT_EQ(core::sha256_file_hex(dir.file("merged_z3") + "/checkpoints/latest/model.safetensors"),
            core::sha256_file_hex(dir.file("merged_z2") + "/checkpoints/latest/model.safetensors"));
}

}  // namespace
}  // namespace lmtrain::testing
