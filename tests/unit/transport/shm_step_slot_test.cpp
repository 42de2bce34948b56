// Which slot holds a rank's data at each protocol step (step_slot, shm_layout.hpp): at every step
// the ranks hold distinct slots (the lanes' reuse rule depends on it), at W = 2 a rank's step
// seq + 2 lies exactly where its peer's step seq lay (the lines it read itself), and W > 2 keeps
// each rank in its own slot.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "transport/shm/shm_layout.hpp"

namespace tpcomm::transport::shm {
namespace {

TEST(ShmStepSlot, AtEveryStepTheRanksHoldDistinctSlotsOfTheirWorld) {
  for (int world : {1, 2, 3, 4, 8}) {
    for (std::uint64_t seq = 0; seq < 64; ++seq) {
      std::set<std::size_t> slots;
      for (int r = 0; r < world; ++r) {
        const std::size_t s = step_slot(r, seq, world);
        EXPECT_LT(s, static_cast<std::size_t>(world)) << "W " << world << " seq " << seq;
        slots.insert(s);
      }
      EXPECT_EQ(slots.size(), static_cast<std::size_t>(world)) << "W " << world << " seq " << seq;
    }
  }
}

TEST(ShmStepSlot, AtTwoRanksEachWritesTwoStepsLaterWhereItReadItsPeer) {
  // Steps seq and seq + 2 use the same lane (seq % 2); the slot must be the peer's of step seq.
  for (std::uint64_t seq = 0; seq < 64; ++seq) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(step_slot(r, seq + 2, 2), step_slot(1 - r, seq, 2))
          << "rank " << r << " seq " << seq;
    }
  }
}

TEST(ShmStepSlot, BeyondTwoRanksEachKeepsItsOwnSlot) {
  for (int world : {3, 4, 8}) {
    for (std::uint64_t seq : {0u, 1u, 2u, 3u, 1000u}) {
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(step_slot(r, seq, world), static_cast<std::size_t>(r));
    }
  }
}

}  // namespace
}  // namespace tpcomm::transport::shm
