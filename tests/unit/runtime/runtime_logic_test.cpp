// Pure pieces of the runtime: element conversion, the facts record, fault specs, node grouping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/convert.hpp"
#include "runtime/facts_exchange.hpp"
#include "runtime/fault_injection.hpp"
#include "runtime/node_identity.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

TEST(Convert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(kernels::cpu::float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to the even 1.0.
  EXPECT_EQ(kernels::cpu::float_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even).
  EXPECT_EQ(kernels::cpu::float_to_bf16(1.01171875f), 0x3f82);
  EXPECT_EQ(kernels::cpu::bf16_to_float(0x3f82), 1.015625f);
  EXPECT_TRUE(std::isnan(kernels::cpu::bf16_to_float(kernels::cpu::float_to_bf16(NAN))));
  EXPECT_EQ(kernels::cpu::float_to_bf16(INFINITY), 0x7f80);
}

TEST(Convert, Fp16RoundTripAndRounding) {
  EXPECT_EQ(kernels::cpu::float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(kernels::cpu::fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(kernels::cpu::float_to_fp16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(kernels::cpu::float_to_fp16(1e6f), 0x7c00);      // overflow to infinity
  // 1 + 2^-11 is halfway between 1.0 and 1 + 2^-10: ties to even.
  EXPECT_EQ(kernels::cpu::float_to_fp16(1.00048828125f), 0x3c00);
  std::vector<float> in = {0.5f, -2.25f, 3.0f};
  std::vector<std::uint16_t> half(3);
  std::vector<float> back(3);
  from_float(in.data(), DataType::kFloat16, 3, half.data());
  to_float(half.data(), DataType::kFloat16, 3, back.data());
  EXPECT_EQ(back, in);
}

TEST(Convert, BlockConversionsMatchTheScalarReference) {
  // Vectorised (F16C, branchless bf16) and scalar conversions agree bit for bit, ties and
  // specials included.
  std::vector<float> values = {0.0f,           -0.0f,    1.0f,    1.00390625f, 1.01171875f,
                               1.00048828125f, 65504.0f, 1e6f,    -1e-8f,      INFINITY,
                               -INFINITY,      NAN,      3.14159f};
  std::uint32_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &x, sizeof(f));
    if (std::isfinite(f) && std::fabs(f) < 1e30f) values.push_back(f);
  }
  std::vector<std::uint16_t> bf(values.size()), half(values.size());
  from_float(values.data(), DataType::kBFloat16, values.size(), bf.data());
  from_float(values.data(), DataType::kFloat16, values.size(), half.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bf[i], kernels::cpu::float_to_bf16(values[i])) << values[i];
    EXPECT_EQ(half[i], kernels::cpu::float_to_fp16(values[i])) << values[i];
  }
  std::vector<float> back(values.size());
  to_float(half.data(), DataType::kFloat16, half.size(), back.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float ref = kernels::cpu::fp16_to_float(half[i]);
    EXPECT_TRUE(back[i] == ref || (std::isnan(back[i]) && std::isnan(ref))) << i;
  }
}

runtime::RankRecord sample_record() {
  runtime::RankRecord r;
  r.facts.host = "node-a";
  r.facts.device.type = DeviceType::kCpu;
  r.boot_id = "boot";
  r.comm_id = 0x1234;
  return r;
}

TEST(FactsRecord, RoundTripsAndNamesTheSenderOfACorruptRecord) {
  Bytes bytes = runtime::encode_record(sample_record());
  runtime::RankRecord back = runtime::decode_record(bytes, 0);
  EXPECT_EQ(back.facts, sample_record().facts);
  EXPECT_EQ(back.comm_id, 0x1234u);
  auto expect_error = [](Bytes b, const std::string& part) {
    try {
      runtime::decode_record(b, 3);
      ADD_FAILURE() << "must fail: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("facts record from rank 3 is corrupt: " + part),
                std::string::npos)
          << e.what();
    }
  };
  Bytes truncated = bytes;
  truncated.resize(truncated.size() - 7);
  expect_error(truncated, "header says");
  Bytes magic = bytes;
  magic[0] ^= 0xff;
  expect_error(magic, "bad magic number");
  Bytes version = bytes;
  version[4] = 9;
  expect_error(version, "record version 9");
  expect_error(Bytes{1, 2, 3}, "3 bytes, shorter than its header");
  Bytes bad_json = bytes;
  bad_json[14] = '#';
  expect_error(bad_json, "");
}

TEST(FaultSpec, ParsesAndMatches) {
  auto faults = runtime::parse_faults("facts:corrupt@1, call:stall@0#5");
  ASSERT_EQ(faults.size(), 2u);
  runtime::FaultPlan rank0(faults, 0);
  runtime::FaultPlan rank1(faults, 1);
  EXPECT_TRUE(rank1.hits("facts", runtime::FaultAction::kCorrupt));
  EXPECT_FALSE(rank0.hits("facts", runtime::FaultAction::kCorrupt));
  EXPECT_TRUE(rank0.hits("call", runtime::FaultAction::kStall, 5));
  EXPECT_FALSE(rank0.hits("call", runtime::FaultAction::kStall, 4));
  EXPECT_THROW(runtime::parse_faults("facts:explode@1"), Error);
  EXPECT_THROW(runtime::parse_faults("facts@1"), Error);
  EXPECT_THROW(runtime::parse_faults("facts:fail@x"), Error);
  runtime::FaultPlan failing(runtime::parse_faults("gloo.connect:fail@0"), 0);
  try {
    failing.apply_fail_or_stall("gloo.connect");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected fault: gloo.connect fails on rank 0"),
              std::string::npos);
  }
}

TEST(NodeIdentity, GroupsRequireBothDirections) {
  // 0 and 1 see each other; 2 sees 0 but 0 does not see 2 (another /dev/shm): separate nodes.
  std::vector<std::vector<bool>> sees = {
      {true, true, false}, {true, true, false}, {true, false, true}};
  EXPECT_EQ(runtime::group_nodes(sees), (std::vector<int>{0, 0, 1}));
}

TEST(NodeIdentity, ProbeSegmentIsVisibleThenGone) {
  std::string name, token;
  {
    runtime::NodeProbeSegment s;
    name = s.name();
    token = s.token();
    EXPECT_TRUE(runtime::can_see_segment(name, token));
    EXPECT_FALSE(runtime::can_see_segment(name, "another token"));
  }
  EXPECT_FALSE(runtime::can_see_segment(name, token));  // unlinked
}

}  // namespace
}  // namespace tpcomm
