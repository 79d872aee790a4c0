// The commands that write runs or output directories besides `train` (import hf, export hf,
// lora merge, export peft, distill-cache) never lose what is already saved (issue 30): each is
// refused (exit 2, naming the path) where it would replace its own input, a locked run or,
// without --overwrite, anything already there; --overwrite moves the earlier content aside
// whole; a stopped or killed command leaves the old output as it was. "Unchanged" is checked
// as a digest of every file and link under the directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "core/run_dir_lock.h"
#include "core/sha256.h"
#include "e2e/corpus.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

namespace fs = std::filesystem;

// relative path -> sha256 of a file's bytes, or "-> target" of a symlink.
std::map<std::string, std::string> tree_digest(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = fs::relative(it->path(), dir).string();
    if (it->is_symlink()) {
      out[rel] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_regular_file() && it->path().filename() != ".lock") {
      out[rel] = core::sha256_file_hex(it->path().string());
    }
  }
  return out;
}

// The digest of `dir` without its previous-* dirs.
std::map<std::string, std::string> run_digest(const std::string& dir) {
  auto d = tree_digest(dir);
  for (auto it = d.begin(); it != d.end();) {
    it = it->first.rfind("previous-", 0) == 0 ? d.erase(it) : std::next(it);
  }
  return d;
}

// Entries of `dir` whose name holds ".tmp.": what an interrupted writer leaves.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) out.push_back(name);
  }
  return out;
}

class OutputSafety : public ::testing::Test {
 protected:
  void SetUp() override { data_ = prepare_synthetic_data(dir_.path()); }
  CommandResult lmtrain(const std::string& args) {
    return run_command(lmtrain_binary() + " " + args);
  }
  // A 4-step run of the tiny model (extra flags appended).
  std::string train(const std::string& name, const std::string& extra = "") {
    const std::string run = dir_.file(name);
    auto r = lmtrain("train" + tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + run +
                     " --train.max_steps=4 --model.tie_embeddings=false" + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return run;
  }
  TempDir dir_{"lmtrain_output_safety"};
  std::string data_;
};

TEST_F(OutputSafety, ImportAndExportNeverReplaceARunOrTheirInput) {
  const std::string run = train("run");
  const std::string hf = dir_.file("hf");
  ASSERT_EQ(lmtrain("export hf " + run + " " + hf).exit_code, 0);
  const auto run_before = tree_digest(run);
  const auto hf_before = tree_digest(hf);

  // import into an existing run: refused, the run untouched.
  expect_refused(lmtrain("import hf " + hf + " --output " + run),
                 {"import hf: the output " + run + " already holds", "checkpoints", "config.yaml",
                  "--overwrite"});
  // import or export onto its own input: refused even with --overwrite.
  expect_refused(lmtrain("import hf " + hf + " --output " + hf + " --overwrite"),
                 {"the output " + hf + " is this command's input " + hf, "not even with"});
  const std::string latest = run + "/checkpoints/latest";
  for (const auto& out : {latest, run, run + "/checkpoints/latest/hf"}) {
    expect_refused(lmtrain("export hf " + latest + " " + out + " --overwrite"),
                   {"export hf: the output " + out, "this command's input"});
  }
  EXPECT_EQ(tree_digest(run), run_before);
  EXPECT_EQ(tree_digest(hf), hf_before);

  // export over an earlier export: refused; with --overwrite the earlier files (a stale shard
  // too) move aside and the new export stands alone.
  write_text(hf + "/model-00001-of-00002.safetensors", "stale");
  expect_refused(lmtrain("export hf " + run + " " + hf),
                 {"the output " + hf + " already holds config.json", "--overwrite"});
  auto r = lmtrain("export hf " + run + " " + hf + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(hf + "/model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(hf + "/previous-1/model-00001-of-00002.safetensors"));
  EXPECT_EQ(run_digest(hf), hf_before);  // the same checkpoint exports the same bytes
  EXPECT_TRUE(temporaries(dir_.path()).empty());

  // A run that a live writer holds (as `train` does) is refused, naming the holder.
  {
    std::string unused;
    auto held = core::try_lock_run_dir(run, unused);
    ASSERT_TRUE(held);
    expect_refused(lmtrain("import hf " + hf + " --output " + run + " --overwrite"),
                   {"is in use by pid " + std::to_string(::getpid())});
  }
  EXPECT_EQ(tree_digest(run), run_before);

  // --overwrite moves the earlier run aside whole; the import then stands in its place.
  r = lmtrain("import hf " + hf + " --output " + run + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(tree_digest(run + "/previous-1"), run_before);
  EXPECT_EQ(fs::read_symlink(latest).string(), "step_00000000");
  EXPECT_TRUE(temporaries(dir_.path()).empty());
}

TEST_F(OutputSafety, LoraMergeNeverReplacesItsRunItsBaseOrAnotherRun) {
  const std::string base = train("base");
  const std::string other = train("other", " --train.seed=5");
  const std::string lora = dir_.file("lora");
  auto r = lmtrain("train" + tiny_train_flags() + " --data.dir=" + data_ + " --run.dir=" + lora +
                   " --model.init_from=" + base +
                   " --model.tie_embeddings=false --lora.rank=4 --train.max_steps=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lora_before = tree_digest(lora), base_before = tree_digest(base),
             other_before = tree_digest(other);

  // Into its own run, or into its base: refused, --overwrite or not.
  for (const std::string flag : {"", " --overwrite"}) {
    expect_refused(lmtrain("lora merge --checkpoint " + lora + " --output " + lora + flag),
                   {"lora merge: the output " + lora + " is this command's input"});
    expect_refused(lmtrain("lora merge --checkpoint " + lora + " --output " + base + flag),
                   {"lora merge: the output " + base + " holds this command's input"});
    expect_refused(lmtrain("export peft --checkpoint " + lora + " --output " + lora + flag),
                   {"export peft: the output " + lora + " is this command's input"});
  }
  // Into another run: refused without --overwrite.
  expect_refused(lmtrain("lora merge --checkpoint " + lora + " --output " + other),
                 {"the output " + other + " already holds", "checkpoints", "--overwrite"});
  EXPECT_EQ(tree_digest(lora), lora_before);
  EXPECT_EQ(tree_digest(base), base_before);
  EXPECT_EQ(tree_digest(other), other_before);
  // The LoRA run still resumes-ready: export peft reads it.
  r = lmtrain("export peft --checkpoint " + lora + " --output " + dir_.file("peft"));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // With --overwrite the other run moves aside whole and the merged one takes its place.
  r = lmtrain("lora merge --checkpoint " + lora + " --output " + other + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(tree_digest(other + "/previous-1"), other_before);
  EXPECT_TRUE(fs::exists(other + "/checkpoints/latest/model.safetensors"));
  EXPECT_TRUE(temporaries(dir_.path()).empty());
}

TEST_F(OutputSafety, DistillCacheChecksItsOutputFirstAndLeavesNoDebris) {
  const std::string teacher = train("teacher");
  const std::string base = "distill-cache" + tiny_train_flags() + " --data.dir=" + data_ +
                           " --distill.teacher=" + teacher + " --top_k 4 --batch_size 2";
  const std::string cache = dir_.file("cache.kdc");
  write_text(cache, "an earlier cache");

  // Refused before the teacher pass (its first line never appears).
  auto r = lmtrain(base + " --output " + cache);
  expect_refused(r, {"distill-cache: the output " + cache + " already exists", "--overwrite"});
  EXPECT_FALSE(contains(r.output, "distill-cache: top-")) << r.output;
  expect_refused(lmtrain(base + " --output " + data_ + "/train_00000.bin --overwrite"),
                 {"the output " + data_ + "/train_00000.bin is this command's input"});
  fs::create_directories(dir_.file("a_dir"));
  expect_refused(lmtrain(base + " --output " + dir_.file("a_dir")), {"is a directory"});
  expect_refused(lmtrain(base + " --output " + dir_.file("no/cache.kdc")), {"does not exist"});

  // SIGTERM after the second batch: exit 143, the earlier cache as it was, no temporaries.
  r = run_command("LMTRAIN_FAULT_TERM=0:2 " + lmtrain_binary() + " " + base + " --output " + cache +
                  " --overwrite");
  EXPECT_EQ(r.exit_code, 143) << r.output;
  EXPECT_TRUE(contains(r.output, "nothing written")) << r.output;
  EXPECT_EQ(read_text(cache), "an earlier cache");
  EXPECT_TRUE(temporaries(dir_.path()).empty());

  // SIGKILL leaves its temporaries; the next run removes them and writes the cache.
  r = run_command("LMTRAIN_FAULT_KILL=0:2 " + lmtrain_binary() + " " + base + " --output " + cache +
                  " --overwrite");
  EXPECT_EQ(r.exit_code, 137) << r.output;
  EXPECT_EQ(temporaries(dir_.path()).size(), 2u);
  EXPECT_EQ(read_text(cache), "an earlier cache");
  r = lmtrain(base + " --output " + cache + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "left by a killed writer")) << r.output;
  EXPECT_TRUE(temporaries(dir_.path()).empty());
  EXPECT_GT(fs::file_size(cache), std::string("an earlier cache").size());
}

}  // namespace
}  // namespace lmtrain::testing
