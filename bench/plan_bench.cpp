// How long planning takes: the planner runs once per communicator on every rank, before any
// collective, so a W = 16 group must plan in well under a millisecond.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "tpcomm/facts_json.hpp"
#include "tpcomm/plan.hpp"

namespace {

std::string fixture(const char* name) {
  std::ifstream in(std::string(TPCOMM_FIXTURES_DIR) + "/topologies/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void BM_MakePlan(benchmark::State& state, const char* file) {
  const tpcomm::FactsTable facts = tpcomm::decode_facts(fixture(file));
  for (auto _ : state) {
    tpcomm::Plan plan = tpcomm::make_plan(facts, {});
    benchmark::DoNotOptimize(plan.digest);
  }
  state.counters["ranks"] = static_cast<double>(facts.ranks.size());
}

void BM_DecodeAndPlan(benchmark::State& state, const char* file) {
  const std::string text = fixture(file);
  for (auto _ : state) {
    tpcomm::Plan plan = tpcomm::make_plan(tpcomm::decode_facts(text), {});
    benchmark::DoNotOptimize(plan.digest);
  }
}

BENCHMARK_CAPTURE(BM_MakePlan, gb200_nvl72_tp16, "gb200_nvl72_tp16.json")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MakePlan, h200x2_tp16, "h200x2_tp16.json")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MakePlan, h100x8_single, "h100x8_single.json")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeAndPlan, gb200_nvl72_tp16, "gb200_nvl72_tp16.json")
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
