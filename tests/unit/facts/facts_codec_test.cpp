// Facts file codec: decoding the shipped topologies, repeat, round trip, and precise errors.
#include <gtest/gtest.h>

#include "support/test_support.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/facts_json.hpp"

namespace tpcomm {
namespace {

using test::fixture_files;
using test::load_facts;

TEST(FactsCodec, DecodesSharedTopologies) {
  EXPECT_EQ(load_facts("topologies/cpu_2x2.json").ranks.size(), 4u);
  EXPECT_EQ(load_facts("topologies/gb200_nvl72_tp16.json").ranks.size(), 16u);
  EXPECT_EQ(load_facts("topologies/h100x8_single.json").ranks.size(), 8u);
  EXPECT_EQ(load_facts("topologies/h200x2_tp16.json").ranks.size(), 16u);
  EXPECT_EQ(load_facts("topologies/l40s_pcie4.json").ranks.size(), 4u);
}

TEST(FactsCodec, RepeatExpandsAndIncrementsDeviceIndex) {
  FactsTable t = load_facts("topologies/gb200_nvl72_tp16.json");
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(t.ranks[r].device.index, r % 4) << "rank " << r;
    EXPECT_EQ(t.ranks[r].host, "tray-" + std::to_string(r / 4 + 1)) << "rank " << r;
  }
  ASSERT_TRUE(t.ranks[9].device.fabric.has_value());
  EXPECT_EQ(t.ranks[9].device.fabric->state, FabricState::kCompleted);
  EXPECT_EQ(t.ranks[9].device.fabric->clique_id, 32766);
}

TEST(FactsCodec, OptionalFieldsAndDefaults) {
  FactsTable t = load_facts("topologies/l40s_pcie4.json");
  EXPECT_FALSE(t.ranks[0].device.nvlink_island.has_value());  // null: no NVLink
  EXPECT_FALSE(t.ranks[0].device.fabric.has_value());         // absent: unknown
  FactsTable cpu = load_facts("topologies/cpu_2x2.json");
  EXPECT_EQ(cpu.ranks[0].device.type, DeviceType::kCpu);
  EXPECT_EQ(cpu.ranks[0].allocator, Allocator::kLegacy);  // default
  EXPECT_EQ(cpu.ranks[0].device.isa, (std::vector<std::string>{"avx512f", "avx512_bf16"}));
  EXPECT_TRUE(cpu.comment.has_value());
  EXPECT_FALSE(cpu.ranks[3].mpi.has_value());  // absent: no MPI world
  FactsTable mixed = load_facts("scenarios/cpu_2x2_one_rank_without_mpi.json");
  EXPECT_EQ(mixed.ranks[2].mpi, "Open MPI v4.1.4, package: Debian OpenMPI");
  EXPECT_FALSE(mixed.ranks[3].mpi.has_value());
}

TEST(FactsCodec, RoundTripOfEveryFixture) {
  for (const auto& folder : {"topologies", "scenarios"}) {
    for (const auto& file : fixture_files(folder)) {
      SCOPED_TRACE(file);
      FactsTable t = load_facts(std::string(folder) + "/" + file);
      std::string encoded = encode_facts(t);
      EXPECT_EQ(decode_facts(encoded), t);
      EXPECT_EQ(encode_facts(decode_facts(encoded)), encoded);  // canonical: a fixed point
    }
  }
}

TEST(FactsCodec, EncodingFoldsRunsIntoRepeat) {
  std::string encoded = encode_facts(load_facts("topologies/h100x8_single.json"));
  EXPECT_NE(encoded.find("\"repeat\": 8"), std::string::npos) << encoded;
  EXPECT_EQ(encoded.find("\"index\": 1"), std::string::npos) << encoded;
}

TEST(FactsCodec, ClusterUuidIsNormalisedAndZeroIsUnknown) {
  const char* doc = R"({"tpcomm_facts": 1, "ranks": [
    {"host": "a", "device": {"type": "cuda", "index": 0, "sm": 100, "p2p": true, "multicast": true,
     "vmm": true, "fabric_handle": true,
     "fabric": {"state": "completed", "cluster_uuid": "8C5E3A1F2B444C1D9E0A5D7F6B2C9A10", "clique_id": 1}}},
    {"host": "b", "device": {"type": "cuda", "index": 0, "sm": 100, "p2p": true, "multicast": true,
     "vmm": true, "fabric_handle": true,
     "fabric": {"state": "completed", "cluster_uuid": "00000000-0000-0000-0000-000000000000", "clique_id": 0}}}]})";
  FactsTable t = decode_facts(doc);
  EXPECT_EQ(*t.ranks[0].device.fabric->cluster_uuid, "8c5e3a1f2b444c1d9e0a5d7f6b2c9a10");
  EXPECT_TRUE(t.ranks[0].device.fabric->has_known_cluster());
  EXPECT_FALSE(t.ranks[1].device.fabric->has_known_cluster());
}

TEST(FactsCodec, CommentsAreAcceptedEverywhereTheyAreAllowed) {
  FactsTable t = decode_facts(R"({"tpcomm_facts": 1, "comment": "top",
    "ranks": [{"host": "a", "comment": "rank", "device": {"type": "cpu"}}]})");
  EXPECT_EQ(t.comment, "top");
  EXPECT_EQ(t.ranks[0].comment, "rank");
  EXPECT_THROW(decode_facts(R"({"tpcomm_facts": 1, "ranks": [{"host": "a",
    "device": {"type": "cpu", "comment": "not here"}}]})"),
               Error);
}

TEST(FactsCodec, TheExampleErrorFromTheIssueIsExact) {
  try {
    test::load_facts("malformed/sm_string.json");
    FAIL() << "decoding must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_STREQ(e.what(), "ranks[3].device.sm: expected an integer, got the string \"90\"");
  }
}

TEST(FactsCodec, EveryMalformedDocumentGivesItsError) {
  auto cases = test::expectations("malformed");
  ASSERT_GE(cases.size(), 12u);
  EXPECT_EQ(cases.size(), fixture_files("malformed").size()) << "each malformed file needs a line";
  for (const auto& [file, expected] : cases) {
    SCOPED_TRACE(file);
    try {
      decode_facts(test::read_file(test::fixture_path("malformed/" + file)));
      ADD_FAILURE() << "decoding must fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(FactsCodec, MoreRanksThanTheLimitAreRefusedWithoutRepeatToo) {
  auto document = [](int entries) {
    std::string text = R"({"tpcomm_facts": 1, "ranks": [)";
    for (int i = 0; i < entries; ++i) {
      text += std::string(i ? "," : "") + R"({"host": "h", "device": {"type": "cpu"}})";
    }
    return text + "]}";
  };
  EXPECT_EQ(decode_facts(document(kMaxRanks)).ranks.size(), static_cast<std::size_t>(kMaxRanks));
  try {
    decode_facts(document(kMaxRanks + 1));
    FAIL() << "4097 entries must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find(
                  "ranks[4096]: the group already has 4096 ranks, the most a facts document may "
                  "describe"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tpcomm
