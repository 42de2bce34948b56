// Inputs a user controls: facts and tuning files (a FIFO or a device is refused at once; a FIFO
// used to block the rank, /dev/zero to grow without bound; so is a file larger than the cap), and
// the /dev/shm space refusal's wording.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include "common/text_file.hpp"
#include "tpcomm/error.hpp"
#include "transport/shm/shm_segment.hpp"

namespace tpcomm {
namespace {

std::string error_of(const std::string& path) {
  try {
    common::read_text_file(path, "tuning file");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
    return e.what();
  }
  return "";
}

TEST(TextFile, AFifoADeviceAndAHugeFileAreRefusedNamingThePath) {
  const std::string dir = "/tmp/tpcomm_text_file_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), "cannot read tuning file " + fifo + ": not a regular file");
  EXPECT_EQ(error_of("/dev/zero"), "cannot read tuning file /dev/zero: not a regular file");
  const std::string huge = dir + "/huge.json";
  const int fd = open(huge.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(common::kMaxTextFileBytes + 1)), 0);  // sparse
  close(fd);
  EXPECT_EQ(error_of(huge),
            "cannot read tuning file " + huge + ": larger than 64 MiB, the most tpcomm reads");
  const std::string small = dir + "/small.json";
  const int sfd = open(small.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_EQ(write(sfd, "{}", 2), 2);
  close(sfd);
  EXPECT_EQ(common::read_text_file(small, "tuning file"), "{}");
  EXPECT_NE(error_of(dir + "/absent").find("No such file or directory"), std::string::npos);
  for (const auto& f : {fifo, huge, small}) unlink(f.c_str());
  rmdir(dir.c_str());
}

// A refusal for lack of /dev/shm space reads as two different sizes even where both round to
// the same MiB (it said "needs 1.0 MiB but only 1.0 MiB are free").
TEST(ShmSpace, TheRefusalShowsExactSizes) {
  const std::string m = transport::shm::no_space_message(1052672, 1048576, "TPCOMM_SHM_WORKSPACE");
  EXPECT_NE(m.find("needs 1052672 bytes (1.0 MiB) in /dev/shm but only 1048576 bytes (1.0 MiB) "
                   "are free"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("or lower TPCOMM_SHM_WORKSPACE"), std::string::npos) << m;
}

}  // namespace
}  // namespace tpcomm
