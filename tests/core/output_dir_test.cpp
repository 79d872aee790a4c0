// core::OutputDir and check_output_file on real directories: the refusals (input, lock, content),
// --overwrite moving the earlier content aside, a staged write that never commits leaving the
// old output as it was, and the removal of killed writers' debris.
#include "core/output_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "core/run_dir_lock.h"
#include "test_util.h"

namespace lmtrain::core {
namespace {
namespace stdfs = std::filesystem;

// The UsageError `f` throws (fails the test when it throws none).
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

// A pid that is certainly dead: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(OutputDir, FreshOutputAppearsOnlyOnCommit) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  {
    OutputDir o(out, {"test", {}, false});
    write_file_atomic(o.staging() + "/a.txt", "new");
    EXPECT_FALSE(stdfs::exists(out));  // nothing visible before commit
    EXPECT_EQ(o.commit(), "");
  }
  EXPECT_EQ(read_file(out + "/a.txt"), "new");
  EXPECT_EQ(std::distance(stdfs::directory_iterator(dir.path()), stdfs::directory_iterator{}), 1);
}

// `export hf RUN hf/tiny` in a fresh checkout: the missing parents are made; a parent that is
// a file is refused, naming it.
// A resumable output (prepare) stages into PARENT/.NAME.partial: kept when the command stops
// without committing, found again by the next run, locked against a second writer, and moved
// into place (without its lock) on commit.
TEST(OutputDir, ResumableStagingIsKeptLockedAndCommitted) {
  testing::TempDir dir;
  const std::string out = dir.file("data");
  const std::string partial = dir.file(".data.partial");
  {
    OutputDir o(out, {"prepare", {}, false, /*resumable=*/true});
    EXPECT_EQ(o.staging(), partial);
    EXPECT_FALSE(o.staging_existed());
    write_file_atomic(o.staging() + "/piece_0", "finished work");
    EXPECT_NE(refusal([&] {
                OutputDir second(out, {"prepare", {}, false, true});
              }).find("another prepare is writing " + out),
              std::string::npos);
  }  // no commit: the work stays
  EXPECT_TRUE(stdfs::exists(partial + "/piece_0"));
  EXPECT_FALSE(stdfs::exists(out));
  {
    OutputDir o(out, {"prepare", {}, false, true});
    EXPECT_TRUE(o.staging_existed());
    EXPECT_EQ(testing::read_text(o.staging() + "/piece_0"), "finished work");
    o.clear_staging();
    EXPECT_FALSE(stdfs::exists(partial + "/piece_0"));
    write_file_atomic(o.staging() + "/result", "done");
    o.commit();
  }
  EXPECT_FALSE(stdfs::exists(partial));
  EXPECT_EQ(testing::read_text(out + "/result"), "done");
  EXPECT_TRUE(run_dir_contents(out) == std::vector<std::string>{"result"});
}

TEST(OutputDir, MakesMissingParentsButNotThroughAFile) {
  testing::TempDir dir;
  const std::string out = dir.file("a/b/out");
  {
    OutputDir o(out, {"test", {}, false});
    write_file_atomic(o.staging() + "/x.txt", "new");
    EXPECT_EQ(o.commit(), "");
  }
  EXPECT_EQ(read_file(out + "/x.txt"), "new");
  write_file_atomic(dir.file("file"), "not a directory");
  const auto msg = refusal([&] { OutputDir o(dir.file("file/out"), {"test", {}, false}); });
  EXPECT_TRUE(
      testing::contains(msg, "cannot make the output's parent directory " + dir.file("file")))
      << msg;
}

TEST(OutputDir, UncommittedWriteLeavesNoTrace) {
  testing::TempDir dir;
  {
    OutputDir o(dir.file("out"), {"test", {}, false});
    write_file_atomic(o.staging() + "/a.txt", "half");
  }  // e.g. an error before commit
  EXPECT_TRUE(stdfs::is_empty(dir.path()));
}

TEST(OutputDir, RefusesOccupiedOutputWithoutOverwrite) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  ensure_dir(out);
  write_file_atomic(out + "/config.json", "old");
  const auto msg = refusal([&] { OutputDir(out, {"export hf", {}, false}); });
  EXPECT_TRUE(testing::contains(msg, "export hf: the output " + out + " already holds config.json"))
      << msg;
  EXPECT_TRUE(testing::contains(msg, "--overwrite")) << msg;
  EXPECT_EQ(read_file(out + "/config.json"), "old");
}

TEST(OutputDir, OverwriteMovesEarlierContentAside) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  ensure_dir(out + "/sub");
  write_file_atomic(out + "/config.json", "old");
  write_file_atomic(out + "/stale.bin", "stale");
  {
    OutputDir o(out, {"export hf", {}, true});
    write_file_atomic(o.staging() + "/config.json", "new");
    // Until commit the old output is whole.
    EXPECT_EQ(read_file(out + "/config.json"), "old");
    EXPECT_EQ(o.commit(), out + "/previous-1");
  }
  EXPECT_EQ(read_file(out + "/config.json"), "new");
  EXPECT_FALSE(stdfs::exists(out + "/stale.bin"));  // no stale file beside the new output
  EXPECT_EQ(read_file(out + "/previous-1/config.json"), "old");
  EXPECT_EQ(read_file(out + "/previous-1/stale.bin"), "stale");
  EXPECT_TRUE(stdfs::is_directory(out + "/previous-1/sub"));
}

TEST(OutputDir, NeverWritesItsInputEvenWithOverwrite) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  const std::string ckpt = run + "/checkpoints/step_1";
  ensure_dir(ckpt);
  for (const auto& [out, relation] :
       std::vector<std::pair<std::string, std::string>>{{run, "holds"},
                                                        {run + "/", "holds"},
                                                        {run + "/../run", "holds"},
                                                        {dir.path(), "holds"},
                                                        {ckpt, "is"},
                                                        {ckpt + "/hf", "lies inside"}}) {
    const auto msg = refusal([&] { OutputDir(out, {"lora merge", {ckpt}, true}); });
    EXPECT_TRUE(testing::contains(msg, " " + relation + " this command's input " + ckpt + ","))
        << out << ": " << msg;
    EXPECT_TRUE(testing::contains(msg, "not even with --overwrite")) << msg;
  }
  EXPECT_TRUE(stdfs::is_directory(ckpt));
  EXPECT_FALSE(stdfs::exists(ckpt + "/hf"));
  EXPECT_TRUE(stdfs::is_empty(ckpt));
}

TEST(OutputDir, RefusesALockedRunDirNamingItsHolder) {
  testing::TempDir dir;
  const std::string out = dir.file("run");
  ensure_dir(out);
  std::string unused;
  auto held = try_lock_run_dir(out, unused);  // as a live `train` holds it
  ASSERT_TRUE(held);
  const auto msg = refusal([&] { OutputDir(out, {"import hf", {}, true}); });
  EXPECT_TRUE(testing::contains(msg, "is in use by pid " + std::to_string(::getpid()))) << msg;
}

TEST(OutputDir, RemovesOnlyDeadWritersDebris) {
  testing::TempDir dir;
  const std::string dead = dir.file(".out.tmp." + std::to_string(dead_pid()));
  const std::string live = dir.file(".out.tmp.1");  // pid 1 is alive
  const std::string other = dir.file(".other.tmp.999999");
  for (const auto& d : {dead, live, other}) ensure_dir(d);
  {
    OutputDir o(dir.file("out"), {"test", {}, false});
    EXPECT_FALSE(stdfs::exists(dead));
    EXPECT_TRUE(stdfs::exists(live));
    EXPECT_TRUE(stdfs::exists(other));
  }
}

TEST(OutputFile, RefusesDirectoriesMissingParentsInputsAndExistingFiles) {
  testing::TempDir dir;
  const std::string data = dir.file("data");
  ensure_dir(data);
  write_file_atomic(data + "/train.bin", "tokens");
  auto msg = refusal([&] { check_output_file(data, {"distill-cache", {}, false}); });
  EXPECT_TRUE(testing::contains(msg, "is a directory")) << msg;
  msg = refusal([&] {
    check_output_file(dir.file("no/such/cache"), {"distill-cache", {}, false});
  });
  EXPECT_TRUE(testing::contains(msg, dir.file("no/such") + " does not exist")) << msg;
  msg = refusal([&] {
    check_output_file(data + "/train.bin", {"distill-cache", {data + "/train.bin"}, true});
  });
  EXPECT_TRUE(testing::contains(msg, "is this command's input")) << msg;
  write_file_atomic(dir.file("cache"), "old");
  msg = refusal([&] { check_output_file(dir.file("cache"), {"distill-cache", {}, false}); });
  EXPECT_TRUE(testing::contains(msg, "already exists")) << msg;
  EXPECT_NO_THROW(check_output_file(dir.file("cache"), {"distill-cache", {}, true}));
  EXPECT_EQ(read_file(dir.file("cache")), "old");
}

TEST(OutputFile, RemovesKilledWritersTemporaries) {
  testing::TempDir dir;
  const std::string pid = std::to_string(dead_pid());
  write_file_atomic(dir.file("cache.tmp." + pid), "x");
  write_file_atomic(dir.file("cache.tmp." + pid + ".logits"), "x");
  write_file_atomic(dir.file("cache.tmp." + std::to_string(::getpid())), "mine");
  check_output_file(dir.file("cache"), {"distill-cache", {}, false});
  EXPECT_FALSE(stdfs::exists(dir.file("cache.tmp." + pid)));
  EXPECT_FALSE(stdfs::exists(dir.file("cache.tmp." + pid + ".logits")));
  EXPECT_TRUE(stdfs::exists(dir.file("cache.tmp." + std::to_string(::getpid()))));
}

}  // namespace
}  // namespace lmtrain::core
