// The plan JSON (docs/plan.md, "JSON") and the digest computed over its canonical form.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "digest.hpp"
#include "tpcomm/plan.hpp"

namespace tpcomm {
namespace {

using Json = nlohmann::json;  // std::map-backed: keys sorted, so dumps are canonical

constexpr int kPlanVersion = 1;

Json op_json(const OpPlan& p) {
  Json j;
  j["eligible"] = Json::array();
  for (Backend b : p.eligible) j["eligible"].push_back(to_string(b));
  j["rejected"] = Json::object();
  for (const auto& [b, reason] : p.rejected) j["rejected"][std::string(to_string(b))] = reason;
  j["zero_copy"] = p.zero_copy;
  j["zero_copy_reason"] = p.zero_copy_reason;
  j["table"] = Json::array();
  for (const auto& row : p.table) {
    Json r;
    r["max_bytes"] = row.max_bytes ? Json(*row.max_bytes) : Json(nullptr);
    r["backend"] = to_string(row.backend);
    r["algorithm"] = to_string(row.algorithm);
    if (row.blocks) r["blocks"] = *row.blocks;
    if (row.step_bytes) r["step_bytes"] = *row.step_bytes;
    j["table"].push_back(r);
  }
  return j;
}

// Everything that decides behaviour; not the digest itself nor the tuning provenance.
Json canonical(const Plan& plan) {
  Json j;
  j["tpcomm_plan"] = kPlanVersion;
  j["world_size"] = plan.world_size;
  j["nodes"] = plan.nodes;
  j["device"] = to_string(plan.device_type);
  j["mode"] = to_string(plan.mode);
  // Only when set: the default plans keep their digests.
  if (plan.deterministic) j["deterministic"] = true;
  j["ops"] = Json::object();
  for (const auto& [op, p] : plan.ops) j["ops"][std::string(to_string(op))] = op_json(p);
  return j;
}

}  // namespace

namespace plan {

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string plan_digest(const Plan& plan) {
  return fmt::format("{:016x}", fnv1a64(canonical(plan).dump()));
}

}  // namespace plan

std::string plan_to_json(const Plan& plan, int indent) {
  Json j = canonical(plan);
  j["tuning"] = plan.tuning;
  j["digest"] = plan.digest;
  return j.dump(indent) + "\n";
}

}  // namespace tpcomm
