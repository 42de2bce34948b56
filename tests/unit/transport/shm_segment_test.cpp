// Where the shm segment's pages come from (src/transport/shm/shm_segment.hpp): the creator
// allocates only its own range, mapping allocates nothing, and each rank's range is allocated by
// that rank's reserve, so a tmpfs page lands on the NUMA node of the rank that writes it.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tpcomm/error.hpp"
#include "transport/shm/shm_segment.hpp"

namespace tpcomm::transport::shm {
namespace {

constexpr std::size_t kRange = 64 * 1024;

// Bytes of /dev/shm the segment holds now (tmpfs counts allocated pages in st_blocks).
std::size_t allocated(const std::string& name) {
  struct stat st {};
  if (stat(("/dev/shm" + name).c_str(), &st) != 0) return static_cast<std::size_t>(-1);
  return static_cast<std::size_t>(st.st_blocks) * 512;
}

TEST(ShmSegment, EachRangeIsAllocatedByItsOwnersReserveAndByNobodyBefore) {
  const std::string name = "/tpcomm-test-segment-" + std::to_string(getpid());
  Segment creator;  // rank 0: the header range [0, kRange)
  creator.create(name, 3 * kRange, kRange, "TPCOMM_SHM_WORKSPACE");
  EXPECT_EQ(allocated(name), kRange) << "the creator allocated beyond its own range";
  Segment peer;  // rank 1: [kRange, 2 kRange)
  peer.open(name, 3 * kRange);
  EXPECT_EQ(allocated(name), kRange) << "mapping allocated pages";
  peer.reserve(kRange, kRange, "TPCOMM_SHM_WORKSPACE");
  EXPECT_EQ(allocated(name), 2 * kRange);
  creator.reserve(2 * kRange, kRange, "TPCOMM_SHM_WORKSPACE");
  EXPECT_EQ(allocated(name), 3 * kRange);
  creator.populate();
  peer.populate();
  EXPECT_EQ(allocated(name), 3 * kRange);
  // One segment: what one mapping writes in any range, the other reads.
  auto* mine = static_cast<unsigned char*>(creator.base());
  const auto* theirs = static_cast<const unsigned char*>(peer.base());
  for (std::size_t i = 0; i < 3 * kRange; ++i) mine[i] = static_cast<unsigned char>(i * 7 + 3);
  for (std::size_t i = 0; i < 3 * kRange; i += 4093) {
    ASSERT_EQ(theirs[i], static_cast<unsigned char>(i * 7 + 3)) << "byte " << i;
  }
  creator.unlink();
  EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0) << "the name outlived unlink";
}

TEST(ShmSegment, ASegmentLargerThanDevShmIsRefusedBeforeAnythingIsAllocated) {
  const std::string name = "/tpcomm-test-segment-big-" + std::to_string(getpid());
  Segment creator;
  try {
    creator.create(name, std::size_t{1} << 50, kRange, "TPCOMM_SHM_WORKSPACE");
    FAIL() << "a 1 PiB segment was created";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("in /dev/shm but only"), std::string::npos) << e.what();
  }
  EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0) << "a refused segment was left behind";
}

// In a child with a private 256 KiB /dev/shm: the creator's check passes (192 KiB needed), then
// something else takes the room a later rank would reserve; that rank's reserve must fail with
// the reason and what to do, not leave it to a SIGBUS in its first call.
TEST(ShmSegment, ARankThatCannotReserveItsRangeIsToldWhyAndWhatToDo) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to mount a small tmpfs on /dev/shm in a private mount namespace; "
                    "not root here";
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    auto report = [&](const std::string& text, int code) {
      [[maybe_unused]] auto n = write(pipe_fds[1], text.data(), text.size());
      _exit(code);
    };
    if (unshare(CLONE_NEWNS) != 0 ||
        mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256k") != 0) {
      report("cannot make a private /dev/shm", 3);
    }
    Segment creator;
    creator.create("/segment", 3 * kRange, kRange, "TPCOMM_SHM_WORKSPACE");
    const int filler = open("/dev/shm/filler", O_CREAT | O_RDWR, 0600);
    if (filler < 0 || posix_fallocate(filler, 0, 160 * 1024) != 0) report("no filler", 4);
    Segment peer;
    peer.open("/segment", 3 * kRange);
    try {
      peer.reserve(kRange, kRange, "TPCOMM_SHM_WORKSPACE");
    } catch (const Error& e) {
      report(e.what(), e.code() == ErrorCode::kUnavailable ? 0 : 5);
    }
    report("the reserve succeeded", 6);
  }
  close(pipe_fds[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: " << text;
  ASSERT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_EQ(text,
            "shm: cannot reserve 0.1 MiB in /dev/shm: No space left on device: enlarge /dev/shm "
            "(mount -o remount,size=2G /dev/shm, or docker run --shm-size=2g) or lower "
            "TPCOMM_SHM_WORKSPACE");
}

}  // namespace
}  // namespace tpcomm::transport::shm
