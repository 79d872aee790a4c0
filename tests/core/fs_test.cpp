#include "core/fs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace lmtrain::core {
namespace {
namespace stdfs = std::filesystem;

// No "<name>.tmp.<pid>" files may be left next to a written file.
bool has_tmp_debris(const std::string& dir) {
  for (const auto& e : stdfs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

TEST(FsTest, ReadFileNamesMissingPath) {
  testing::TempDir dir;
  try {
    read_file(dir.file("missing.bin"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.bin")), std::string::npos);
  }
}

TEST(FsTest, WriteFileAtomicCreatesAndReplaces) {
  testing::TempDir dir;
  const std::string path = dir.file("a.bin");
  std::string binary("x\0y\xff", 4);
  write_file_atomic(path, binary);
  EXPECT_EQ(read_file(path), binary);
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  write_file_atomic(path, "");
  EXPECT_EQ(read_file(path), "");
  EXPECT_FALSE(has_tmp_debris(dir.path()));
}

TEST(FsTest, AbandonedWriterLeavesOldFile) {
  testing::TempDir dir;
  const std::string path = dir.file("keep.txt");
  write_file_atomic(path, "old");
  {
    AtomicFileWriter w(path);
    w.write("partial new content");
    // destroyed without commit(), as when an exception unwinds a save
  }
  EXPECT_EQ(read_file(path), "old");
  EXPECT_FALSE(has_tmp_debris(dir.path()));
}

TEST(FsTest, WriterInMissingDirNamesPath) {
  testing::TempDir dir;
  EXPECT_THROW(write_file_atomic(dir.file("no/such/dir/f"), "x"), Error);
}

TEST(FsTest, EnsureDir) {
  testing::TempDir dir;
  ensure_dir(dir.file("a/b/c"));
  EXPECT_TRUE(stdfs::is_directory(dir.file("a/b/c")));
  ensure_dir(dir.file("a/b/c"));  // idempotent
  write_file_atomic(dir.file("plain"), "x");
  EXPECT_THROW(ensure_dir(dir.file("plain")), Error);
}

TEST(FsTest, AtomicSymlinkCreatesAndRepoints) {
  testing::TempDir dir;
  ensure_dir(dir.file("one"));
  ensure_dir(dir.file("two"));
  atomic_symlink("one", dir.file("latest"));
  EXPECT_EQ(stdfs::read_symlink(dir.file("latest")).string(), "one");
  atomic_symlink("two", dir.file("latest"));
  EXPECT_EQ(stdfs::read_symlink(dir.file("latest")).string(), "two");
  EXPECT_TRUE(stdfs::is_directory(dir.file("latest")));
  EXPECT_FALSE(has_tmp_debris(dir.path()));
}

TEST(FsTest, ParentDir) {
  EXPECT_EQ(parent_dir("a/b/c"), "a/b");
  EXPECT_EQ(parent_dir("a/b/"), "a");
  EXPECT_EQ(parent_dir("file"), ".");
  EXPECT_EQ(parent_dir("/x"), "/");
}

}  // namespace
}  // namespace lmtrain::core
