// Tuning tables: the built-in coverage and thresholds, the file codec and its errors, lookup.
#include <gtest/gtest.h>

#include <map>

#include "support/test_support.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

const TuningEntry* builtin_entry(DeviceType d, std::optional<int> sm, int w,
                                 std::optional<Mode> mode) {
  for (const auto& e : builtin_tuning().entries) {
    if (e.key == TuningKey{d, sm, w, mode}) return &e;
  }
  return nullptr;
}

// The built-in cpu rows of one op for a group of `w`.
const std::vector<TuningRow>& cpu_rows(int w, Op op) {
  return builtin_entry(DeviceType::kCpu, std::nullopt, w, std::nullopt)->ops.at(op);
}

// An shm candidate as the built-in table writes it.
Candidate shm(Algorithm algorithm, std::optional<std::uint64_t> step = std::nullopt) {
  return Candidate{Backend::kShm, algorithm, std::nullopt, step};
}

TEST(BuiltinTuning, CoversEveryKeyTheIssueNames) {
  for (int sm : {80, 90, 100}) {
    for (int w = 2; w <= 16; ++w) {
      for (Mode m : {Mode::kEager, Mode::kGraph}) {
        const TuningEntry* e = builtin_entry(DeviceType::kCuda, sm, w, m);
        ASSERT_NE(e, nullptr) << "sm " << sm << " W " << w;
        EXPECT_EQ(e->ops.size(), std::size(Names<Op>::table));
      }
    }
  }
  for (int w = 2; w <= 16; ++w) {
    const TuningEntry* e = builtin_entry(DeviceType::kCpu, std::nullopt, w, std::nullopt);
    ASSERT_NE(e, nullptr) << "cpu W " << w;
    EXPECT_EQ(e->ops.size(), std::size(Names<Op>::table));
  }
}

TEST(BuiltinTuning, ThresholdsFollowPublicFigures) {
  auto first_max = [](const TuningEntry* e) {
    return *e->ops.at(Op::kAllReduce).front().max_bytes;
  };
  EXPECT_EQ(first_max(builtin_entry(DeviceType::kCuda, 90, 8, Mode::kEager)), 256 * KiB);
  EXPECT_EQ(first_max(builtin_entry(DeviceType::kCuda, 90, 4, Mode::kEager)), 512 * KiB);
  EXPECT_EQ(first_max(builtin_entry(DeviceType::kCuda, 90, 16, Mode::kEager)), 64 * KiB);
  // multimem takes large messages on sm90 W = 8 up to 64 MiB, then NCCL.
  const auto& rows = builtin_entry(DeviceType::kCuda, 90, 8, Mode::kEager)->ops.at(Op::kAllReduce);
  EXPECT_EQ(rows[1].use.front().backend, Backend::kMultimem);
  EXPECT_EQ(rows[rows.size() - 2].max_bytes, 64 * MiB);
  EXPECT_EQ(rows.back().use.front().backend, Backend::kNccl);
}

// shm all-gather: W = 2 through the lanes up to 64 KiB, then each peer's input read in place;
// larger groups (measured only with ranks sharing cores) through the lanes at every size.
TEST(BuiltinTuning, CpuAllGatherSwitchesToSingleCopyForTwoRanksOnly) {
  const auto& two = cpu_rows(2, Op::kAllGather);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].max_bytes, 64 * KiB);
  EXPECT_EQ(two[0].use.front(), shm(Algorithm::kOneShot));
  EXPECT_EQ(two[1].use.front(), shm(Algorithm::kSingleCopy));
  for (int w : {3, 4, 8, 16}) {
    const auto& rows = cpu_rows(w, Op::kAllGather);
    ASSERT_EQ(rows.size(), 1u) << "W " << w;
    EXPECT_EQ(rows[0].use.front().algorithm, Algorithm::kOneShot) << "W " << w;
  }
}

// shm all-reduce for groups of three or more: one-shot up to 64 KiB (W <= 4), 32 KiB (W <= 8) or
// 16 KiB, two-shot above.
TEST(BuiltinTuning, CpuLargerGroupsSwitchToTwoShotSoonerTheLargerTheyAre) {
  const std::map<int, std::uint64_t> one_shot_max = {{3, 64 * KiB}, {4, 64 * KiB}, {5, 32 * KiB},
                                                     {8, 32 * KiB}, {9, 16 * KiB}, {16, 16 * KiB}};
  for (const auto& [w, max] : one_shot_max) {
    const auto& rows = cpu_rows(w, Op::kAllReduce);
    ASSERT_EQ(rows.size(), 2u) << "W " << w;
    EXPECT_EQ(rows[0].max_bytes, max) << "W " << w;
    EXPECT_EQ(rows[0].use.front(), shm(Algorithm::kOneShot)) << "W " << w;
    EXPECT_EQ(rows[1].use.front(), shm(Algorithm::kTwoShot)) << "W " << w;
  }
}

// shm all-reduce, W = 2: one-shot at every size, in one step up to 256 KiB and in steps of
// 128 KiB above; a step goes through the file format and into the plan's rows.
TEST(BuiltinTuning, CpuTwoRanksAllReduceTakesSmallerStepsAbove256KiB) {
  const auto& rows = cpu_rows(2, Op::kAllReduce);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].max_bytes, 256 * KiB);
  EXPECT_EQ(rows[0].use.front(), shm(Algorithm::kOneShot));
  EXPECT_EQ(rows[1].use.front(), shm(Algorithm::kOneShot, 128 * KiB));
  const Tuning t = decode_tuning(
      R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 3, "ops": {)"
      R"("reduce_scatter": [{"max_bytes": null, "use": [{"backend": "shm", "step_bytes": 4096}]}]}}]})",
      "inline");
  EXPECT_EQ(t.entries[0].ops.at(Op::kReduceScatter)[0].use[0].step_bytes, 4096u);
  EXPECT_NE(encode_tuning(t).find("\"step_bytes\": 4096"), std::string::npos) << encode_tuning(t);
}

TEST(BuiltinTuning, RowsAreWellFormed) {
  for (const auto& e : builtin_tuning().entries) {
    for (const auto& [op, rows] : e.ops) {
      ASSERT_FALSE(rows.empty());
      EXPECT_FALSE(rows.back().max_bytes.has_value());
      for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
        ASSERT_TRUE(rows[i].max_bytes.has_value());
        if (i > 0) {
          EXPECT_GT(*rows[i].max_bytes, *rows[i - 1].max_bytes);
        }
      }
    }
  }
}

TEST(TuningCodec, BuiltinTablesRoundTripThroughTheFileFormat) {
  const Tuning& builtin = builtin_tuning();
  Tuning reread = decode_tuning(encode_tuning(builtin), "dump");
  EXPECT_EQ(reread.entries, builtin.entries);
}

TEST(TuningCodec, ValidFileDecodes) {
  Tuning t = decode_tuning(test::read_file(test::fixture_path("tuning/valid_sm90_w8.json")), "f");
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].key, (TuningKey{DeviceType::kCuda, 90, 8, Mode::kEager}));
  const auto& rows = t.entries[0].ops.at(Op::kAllReduce);
  EXPECT_EQ(rows[0].use[0], (Candidate{Backend::kCustom, Algorithm::kOneShot, 24, std::nullopt}));
  EXPECT_EQ(rows[1].use[0], (Candidate{Backend::kNccl, Algorithm::kNccl, std::nullopt,
                                       std::nullopt}));  // default algorithm
}

TEST(TuningCodec, EveryMalformedFileGivesItsError) {
  auto cases = test::expectations("tuning");
  EXPECT_EQ(cases.size() + 1, test::fixture_files("tuning").size()) << "one line per bad file";
  for (const auto& [file, expected] : cases) {
    SCOPED_TRACE(file);
    try {
      decode_tuning(test::read_file(test::fixture_path("tuning/" + file)), file);
      ADD_FAILURE() << "decoding must fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(TuningCodec, TeamMinBytesIsACpuEntrysAndRoundTrips) {
  const std::string cpu =
      R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 4,
      "team_min_bytes": 131072, "ops": {"all_reduce": [{"max_bytes": null,
      "use": [{"backend": "shm"}]}]}}]})";
  const Tuning t = decode_tuning(cpu, "f");
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].team_min_bytes, std::optional<std::uint64_t>(131072));
  EXPECT_EQ(decode_tuning(encode_tuning(t), "again").entries, t.entries);
  EXPECT_EQ(find_team_min_bytes(t, 4), 131072u);
  EXPECT_EQ(find_team_min_bytes(t, 2), kDefaultTeamMinBytes);  // no entry for 2 ranks
  EXPECT_EQ(find_team_min_bytes(Tuning{}, 4), kDefaultTeamMinBytes);
  const std::string gpu =
      R"({"tpcomm_tuning": 1, "entries": [{"device": "cuda", "sm": 90, "world_size": 4,
      "team_min_bytes": 1, "ops": {"all_reduce": [{"max_bytes": null,
      "use": [{"backend": "nccl"}]}]}}]})";
  try {
    decode_tuning(gpu, "f");
    FAIL() << "a cuda entry took team_min_bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("entries[0].team_min_bytes: only cpu entries take"),
              std::string::npos)
        << e.what();
  }
}

TEST(TuningLookup, SmFallsBackToTheNearestLowerTable) {
  auto desc = [](int sm, int w) {
    return find_tuning({}, DeviceType::kCuda, sm, w, Mode::kEager, Op::kAllReduce).description;
  };
  EXPECT_EQ(desc(89, 4), "built-in: cuda sm 80 world size 4 eager");
  EXPECT_EQ(desc(103, 8), "built-in: cuda sm 100 world size 8 eager");
  EXPECT_EQ(desc(120, 8), "built-in: cuda sm 100 world size 8 eager");
  EXPECT_EQ(desc(70, 2), "built-in: cuda sm 80 world size 2 eager");  // below every table
  EXPECT_EQ(desc(90, 32), "built-in: cuda sm 90 world size 16 eager");
}

TEST(TuningLookup, OverrideEntryWinsOnlyForItsKey) {
  Tuning t = decode_tuning(test::read_file(test::fixture_path("tuning/valid_sm90_w8.json")), "f");
  EXPECT_EQ(find_tuning(t, DeviceType::kCuda, 90, 8, Mode::kEager, Op::kAllReduce).description,
            "f: cuda sm 90 world size 8 eager");
  EXPECT_EQ(find_tuning(t, DeviceType::kCuda, 100, 8, Mode::kEager, Op::kAllReduce).description,
            "f: cuda sm 90 world size 8 eager");  // sm 100 group, nearest lower override table
  EXPECT_EQ(find_tuning(t, DeviceType::kCuda, 90, 4, Mode::kEager, Op::kAllReduce).description,
            "built-in: cuda sm 90 world size 4 eager");
  EXPECT_EQ(find_tuning(t, DeviceType::kCuda, 90, 8, Mode::kEager, Op::kAllGather).description,
            "built-in: cuda sm 90 world size 8 eager");
}

}  // namespace
}  // namespace tpcomm
