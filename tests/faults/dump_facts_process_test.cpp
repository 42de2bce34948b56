// TPCOMM_DUMP_FACTS names a file to write; pointed at anything else (a FIFO, a device node, a
// link) it leaves that thing as it was and says so, and the communicator is still created. As root
// the dump once replaced /dev/full with a regular file.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "support/test_support.hpp"

namespace tpcomm {
namespace {

// A fresh directory of its own under /tmp, removed with everything in it.
class DumpFactsTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/tpcomm_dump_target_XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    dir_ = path;
  }
  void TearDown() override {
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') unlink((dir_ + "/" + e->d_name).c_str());
      }
      closedir(d);
    }
    rmdir(dir_.c_str());
  }

  // Two ranks create a communicator with the dump pointed at `target`.
  test::ProcessResult create_with_dump(const std::string& target) {
    return test::run_process(
        {TPCOMM_BIN, "run", "-n", "2", "--", TPCOMM_WORKER, "create", "tpcomm-dump-facts-test"},
        {{"TPCOMM_DUMP_FACTS", target}, {"TPCOMM_LOG", ""}, {"TPCOMM_FAULT", ""}},
        std::chrono::seconds(60));
  }

  int entries() const {
    int n = 0;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  }

  std::string dir_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(DumpFactsTarget, AFifoStaysAFifoAndRankZeroIsTold) {
  const std::string fifo = dir_ + "/facts.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = create_with_dump(fifo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced, mode " << std::oct << st.st_mode;
  EXPECT_TRUE(contains(r.err, "[0] ") && contains(r.err, "TPCOMM_DUMP_FACTS: " + fifo) &&
              contains(r.err, "is a FIFO, not a regular file"))
      << r.err;
  EXPECT_EQ(entries(), 1) << "no temporary file left beside it";
}

// The same major and minor as /dev/null: writing to it would do no harm even if it were opened.
TEST_F(DumpFactsTarget, ACharacterDeviceStaysADeviceAndRankZeroIsTold) {
  const std::string device = dir_ + "/facts.dev";
  if (mknod(device.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot create a character device here (mknod: " << std::strerror(errno)
                 << "); the FIFO test covers the same check";
  }
  auto r = create_with_dump(device);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(lstat(device.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced, mode " << std::oct << st.st_mode;
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_TRUE(contains(r.err, "TPCOMM_DUMP_FACTS: " + device) &&
              contains(r.err, "is a character device, not a regular file"))
      << r.err;
  EXPECT_EQ(entries(), 1) << "no temporary file left beside it";
}

// A link is refused too: renaming over it would replace the link, not the file it names.
TEST_F(DumpFactsTarget, ALinkStaysALinkAndItsTargetIsUntouched) {
  const std::string file = dir_ + "/real.json", link = dir_ + "/facts.json";
  std::ofstream(file) << "keep me\n";
  ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  auto r = create_with_dump(link);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(test::read_file(file), "keep me\n");
  EXPECT_TRUE(contains(r.err, "is a symbolic link, not a regular file")) << r.err;
}

// What the dump is for still works: an existing regular file is replaced with the facts.
TEST_F(DumpFactsTarget, ARegularFileIsReplacedWithTheFacts) {
  const std::string file = dir_ + "/facts.json";
  std::ofstream(file) << "old\n";
  auto r = create_with_dump(file);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(test::read_file(file), "\"tpcomm_facts\": 1")) << test::read_file(file);
  EXPECT_FALSE(contains(r.err, "TPCOMM_DUMP_FACTS")) << r.err;
  EXPECT_EQ(entries(), 1);
}

}  // namespace
}  // namespace tpcomm
