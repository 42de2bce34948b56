// Where the shm segment's pages come from (src/transport/shm/shm_segment.hpp): the creator
// allocates only its own range, mapping allocates nothing, and each rank's range is allocated by
// that rank's reserve, so a tmpfs page lands on the NUMA node of the rank that writes it.
#include <sys/stat.h>
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

}  // namespace
}  // namespace tpcomm::transport::shm
