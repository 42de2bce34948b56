// Finding the tuning rows for a group: an override entry first, then the built-in tables.
#include <algorithm>

#include <fmt/format.h>

#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

// Among entries for (device, world size, mode) that cover `op`: the one with the highest sm not
// above the group's lowest sm (an exact mode beats an entry for both modes). When the group's sm
// is below every table, the lowest-sm table serves it.
const TuningEntry* pick(const Tuning& tuning, DeviceType device, int min_sm, int world_size,
                        Mode mode, Op op) {
  const TuningEntry* best = nullptr;
  auto better = [&](const TuningEntry& a, const TuningEntry* b, bool below) {
    if (b == nullptr) return true;
    int sa = a.key.sm.value_or(0);
    int sb = b->key.sm.value_or(0);
    if (sa != sb) return below ? sa > sb : sa < sb;
    return a.key.mode.has_value() && !b->key.mode.has_value();
  };
  for (bool below : {true, false}) {
    for (const auto& e : tuning.entries) {
      if (e.key.device != device || e.key.world_size != world_size) continue;
      if (e.key.mode && *e.key.mode != mode) continue;
      if (e.ops.find(op) == e.ops.end()) continue;
      if (below && e.key.sm && *e.key.sm > min_sm) continue;
      if (better(e, best, below)) best = &e;
    }
    if (best != nullptr) return best;
  }
  return nullptr;
}

std::string describe(const Tuning& tuning, const TuningEntry& e, Mode mode) {
  std::string text = fmt::format("{}: {}", tuning.source, to_string(e.key.device));
  if (e.key.sm) text += fmt::format(" sm {}", *e.key.sm);
  return text + fmt::format(" world size {} {}", e.key.world_size, to_string(mode));
}

}  // namespace

std::uint64_t find_team_min_bytes(const Tuning& overrides, int world_size) {
  for (const auto& e : overrides.entries) {
    if (e.key.device == DeviceType::kCpu && e.key.world_size == world_size && e.team_min_bytes) {
      return *e.team_min_bytes;
    }
  }
  return kDefaultTeamMinBytes;
}

TuningLookup find_tuning(const Tuning& overrides, DeviceType device, int min_sm, int world_size,
                         Mode mode, Op op) {
  if (const TuningEntry* e = pick(overrides, device, min_sm, world_size, mode, op)) {
    return {&e->ops.at(op), describe(overrides, *e, mode)};
  }
  // Built-in tables cover world sizes 2-16; larger groups use the 16-rank rows, whose fast
  // backends are then refused by admission and fall through to the fallback engine.
  const Tuning& builtin = builtin_tuning();
  int w = std::clamp(world_size, 2, 16);
  if (const TuningEntry* e = pick(builtin, device, min_sm, w, mode, op)) {
    return {&e->ops.at(op), describe(builtin, *e, mode)};
  }
  return {};
}

}  // namespace tpcomm
