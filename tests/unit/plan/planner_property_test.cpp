// Property test with a seeded generator: for random valid fact tables the plan is deterministic
// (same digest however the JSON keys are ordered, whatever the locale), every backend of the
// device type is either eligible or rejected, the fallback engine is always eligible, and the
// size tables are well formed.
#include <gtest/gtest.h>

#include <algorithm>
#include <locale>
#include <random>

#include <nlohmann/json.hpp>

#include "tpcomm/facts_json.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm {
namespace {

using Rng = std::mt19937_64;

bool chance(Rng& rng, double p) {
  return std::bernoulli_distribution(p)(rng);
}
int pick(Rng& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}
template <typename T>
const T& pick_of(Rng& rng, const std::vector<T>& v) {
  return v[static_cast<std::size_t>(pick(rng, 0, static_cast<int>(v.size()) - 1))];
}

FabricInfo random_fabric(Rng& rng) {
  static const std::vector<std::string> uuids = {"8c5e3a1f-2b44-4c1d-9e0a-5d7f6b2c9a10",
                                                 "1f0e9d8c-7b6a-4954-8372-6150a4b3c2d1",
                                                 "00000000-0000-0000-0000-000000000000"};
  FabricInfo f;
  f.state = chance(rng, 0.7) ? FabricState::kCompleted : static_cast<FabricState>(pick(rng, 0, 2));
  if (chance(rng, 0.9)) f.cluster_uuid = chance(rng, 0.8) ? uuids[0] : pick_of(rng, uuids);
  if (chance(rng, 0.9)) f.clique_id = chance(rng, 0.8) ? 7 : pick(rng, 0, 3);
  return f;
}

DeviceFacts random_cuda(Rng& rng) {
  DeviceFacts d;
  d.type = DeviceType::kCuda;
  d.sm = pick_of(rng, std::vector<int>{80, 86, 89, 90, 100, 103, 120});
  if (chance(rng, 0.8)) d.nvlink_island = chance(rng, 0.85) ? 0 : 1;
  d.p2p = chance(rng, 0.85);
  d.multicast = chance(rng, 0.7);
  d.vmm = chance(rng, 0.9);
  d.fabric_handle = chance(rng, 0.6);
  if (chance(rng, 0.8)) d.fabric = random_fabric(rng);
  if (chance(rng, 0.5)) d.numa = pick(rng, 0, 1);
  return d;
}

FactsTable random_table(Rng& rng) {
  FactsTable t;
  const bool cuda = chance(rng, 0.7);
  const int hosts = chance(rng, 0.5) ? 1 : pick(rng, 2, 5);
  for (int h = 0; h < hosts; ++h) {
    const int per_host = pick(rng, 1, cuda ? 8 : 4);
    DeviceFacts base;
    if (cuda) {
      base = random_cuda(rng);
    } else {
      base.type = DeviceType::kCpu;
      if (chance(rng, 0.5)) base.numa = pick(rng, 0, 3);
      if (chance(rng, 0.5)) base.isa = {"avx2", "avx512f"};
    }
    const Allocator alloc = chance(rng, 0.5) ? Allocator::kVmm : Allocator::kLegacy;
    for (int i = 0; i < per_host; ++i) {
      RankFacts r;
      r.host = "host-" + std::to_string(h);
      r.device = cuda && chance(rng, 0.1) ? random_cuda(rng) : base;  // some odd ranks out
      if (cuda) r.device.index = i;
      r.allocator = chance(rng, 0.05) ? Allocator::kLegacy : alloc;
      t.ranks.push_back(r);
    }
  }
  return t;
}

// Serialises JSON with object keys in a random order and random spacing.
std::string shuffled_json(const nlohmann::json& j, Rng& rng) {
  const std::string space = chance(rng, 0.5) ? " " : "\n  ";
  if (j.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items()) keys.push_back(k);
    std::shuffle(keys.begin(), keys.end(), rng);
    std::string out = "{";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out += (i ? "," : "") + space + nlohmann::json(keys[i]).dump() + ":" +
             shuffled_json(j.at(keys[i]), rng);
    }
    return out + space + "}";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < j.size(); ++i) out += (i ? "," : "") + shuffled_json(j[i], rng);
    return out + "]";
  }
  return j.dump();
}

void check_invariants(const FactsTable& facts, const Plan& plan) {
  const DeviceType type = facts.ranks.front().device.type;
  const int w = static_cast<int>(facts.ranks.size());
  EXPECT_EQ(plan.world_size, w);
  for (const auto& [op, p] : plan.ops) {
    SCOPED_TRACE(std::string(to_string(op)));
    std::size_t seen = 0;
    for (Backend b : backends_of(type)) {
      const bool eligible = p.is_eligible(b);
      const bool rejected = p.rejected.count(b) != 0;
      EXPECT_NE(eligible, rejected) << to_string(b) << " must be in exactly one list";
      if (rejected) {
        EXPECT_FALSE(p.rejected.at(b).empty()) << "empty reason for " << to_string(b);
      }
      seen += eligible + rejected;
    }
    EXPECT_EQ(seen, p.eligible.size() + p.rejected.size()) << "a backend of the other device type";
    EXPECT_TRUE(p.is_eligible(fallback_backend(type)));
    EXPECT_EQ(p.is_eligible(Backend::kLocal), w == 1);
    if (p.zero_copy) {
      EXPECT_TRUE(p.is_eligible(Backend::kCustom));
    }
    ASSERT_FALSE(p.table.empty());
    EXPECT_FALSE(p.table.back().max_bytes.has_value());
    for (std::size_t i = 0; i < p.table.size(); ++i) {
      const TableRow& row = p.table[i];
      EXPECT_TRUE(p.is_eligible(row.backend)) << "table uses refused " << to_string(row.backend);
      const auto& algos = algorithms_of(row.backend, op);
      EXPECT_NE(std::find(algos.begin(), algos.end(), row.algorithm), algos.end());
      if (row.blocks) {
        EXPECT_TRUE(takes_blocks(row.backend));
      }
      if (i + 1 < p.table.size()) {
        ASSERT_TRUE(row.max_bytes.has_value());
        if (i > 0) {
          EXPECT_GT(*row.max_bytes, *p.table[i - 1].max_bytes);
        }
      }
    }
  }
}

// Groups digits in threes with '#': a locale that would corrupt naive number formatting.
struct OddNumbers : std::numpunct<char> {
  char do_thousands_sep() const override { return '#'; }
  std::string do_grouping() const override { return "\3"; }
  char do_decimal_point() const override { return ','; }
};

TEST(PlannerProperty, RandomTablesGiveDeterministicWellFormedPlans) {
  int cases = 0;
  for (std::uint64_t seed : {1u, 2u, 3u, 42u, 2026u}) {
    Rng rng(seed);
    for (int i = 0; i < 80; ++i, ++cases) {
      FactsTable facts = random_table(rng);
      SCOPED_TRACE("seed " + std::to_string(seed) + " case " + std::to_string(i) + ":\n" +
                   encode_facts(facts));
      PlanOptions options;
      options.mode = chance(rng, 0.5) ? Mode::kGraph : Mode::kEager;
      Plan plan = make_plan(facts, options);
      check_invariants(facts, plan);

      std::string text = shuffled_json(nlohmann::json::parse(encode_facts(facts)), rng);
      FactsTable reread = decode_facts(text);
      EXPECT_EQ(reread, facts);
      Plan again = make_plan(reread, options);
      EXPECT_EQ(again.digest, plan.digest);
      EXPECT_EQ(plan_to_json(again), plan_to_json(plan));
    }
  }
  EXPECT_EQ(cases, 400);
}

TEST(PlannerProperty, DigestIgnoresTheGlobalLocale) {
  FactsTable facts;
  Rng rng(7);
  while (facts.ranks.size() < 9) facts = random_table(rng);
  const Plan before = make_plan(facts, {});
  std::locale previous = std::locale::global(std::locale(std::locale::classic(), new OddNumbers));
  const Plan during = make_plan(facts, {});
  std::locale::global(previous);
  EXPECT_EQ(during.digest, before.digest);
  EXPECT_EQ(plan_to_json(during), plan_to_json(before));
}

TEST(PlannerProperty, DifferentPlansHaveDifferentDigests) {
  Rng rng(11);
  std::map<std::string, std::string> body_by_digest;
  for (int i = 0; i < 200; ++i) {
    Plan plan = make_plan(random_table(rng), {});
    auto json = nlohmann::json::parse(plan_to_json(plan));
    json.erase("digest");  // the plan without its digest and provenance
    json.erase("tuning");
    std::string body = json.dump();
    auto [it, fresh] = body_by_digest.emplace(plan.digest, body);
    if (!fresh) {
      EXPECT_EQ(it->second, body) << "two different plans share digest " << plan.digest;
    }
  }
  EXPECT_GT(body_by_digest.size(), 20u);
}

}  // namespace
}  // namespace tpcomm
