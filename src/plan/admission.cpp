// Admission rules (docs/plan.md, "How it is decided"). Each rule collects every violated condition,
// so an operator sees all that must change, not only the first.
#include "admission.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace tpcomm::plan {
namespace {

constexpr int kCustomMaxWorld = 16;
constexpr int kMultimemMinSm = 90;
constexpr int kMultimemCrossNodeMinSm = 100;

// The violated conditions of one rule, each "<ranks>: <facts>"; consecutive conditions on the
// same ranks share one prefix ("all 4 ranks on host box: multicast false, sm below 90").
class Problems {
 public:
  void add(const std::string& who, std::string_view what) {
    if (!items_.empty() && items_.back().first == who) {
      items_.back().second += fmt::format(", {}", what);
    } else {
      items_.emplace_back(who, std::string(what));
    }
  }
  void add(std::string_view text) { items_.emplace_back(std::string(), std::string(text)); }
  void append(const Problems& other) {
    for (const auto& [who, what] : other.items_) who.empty() ? add(what) : add(who, what);
  }
  bool empty() const { return items_.empty(); }
  std::string text() const {
    std::vector<std::string> parts;
    for (const auto& [who, what] : items_) parts.push_back(who.empty() ? what : who + ": " + what);
    return fmt::format("{}", fmt::join(parts, "; "));
  }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

std::optional<std::string> verdict(const Problems& problems, const std::string& prefix = {}) {
  if (problems.empty()) return std::nullopt;
  return prefix + problems.text();
}

// Adds "<ranks>: <what>" when some ranks fail the predicate.
void require(const GroupView& g, Problems& problems,
             const std::function<bool(const RankFacts&)>& ok, std::string_view what) {
  auto bad = g.ranks_where([&](const RankFacts& r) { return !ok(r); });
  if (!bad.empty()) problems.add(g.describe(bad), what);
}

// Groups ranks by a value and describes each group: "island 0: ranks 0-3 on host a; ...".
template <typename Key>
std::string describe_partition(const GroupView& g,
                               const std::function<Key(const RankFacts&)>& key_of,
                               const std::function<std::string(const Key&)>& label) {
  std::vector<std::pair<Key, std::vector<int>>> groups;  // first-appearance order
  for (int r = 0; r < g.world_size(); ++r) {
    Key k = key_of(g.rank(r));
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& p) { return p.first == k; });
    if (it == groups.end()) {
      groups.push_back({k, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [k, ranks] : groups) parts.push_back(label(k) + ": " + g.describe(ranks));
  return fmt::format("{}", fmt::join(parts, "; "));
}

bool one_nvlink_island(const GroupView& g) {
  const auto& first = g.rank(0).device.nvlink_island;
  if (!first) return false;
  for (int r = 1; r < g.world_size(); ++r) {
    if (g.rank(r).device.nvlink_island != first) return false;
  }
  return true;
}

// Why the ranks of one node are not one NVLink island.
Problems island_problems(const GroupView& g) {
  Problems p;
  if (one_nvlink_island(g)) return p;
  auto no_link = g.ranks_where([](const RankFacts& r) { return !r.device.nvlink_island; });
  if (!no_link.empty()) {
    p.add(g.describe(no_link), "no NVLink (nvlink_island null)");
  }
  std::set<int> islands;
  for (int r = 0; r < g.world_size(); ++r) {
    if (const auto& i = g.rank(r).device.nvlink_island) islands.insert(*i);
  }
  if (islands.size() > 1) {
    p.add("ranks are split over NVLink islands (" +
          describe_partition<std::optional<int>>(
              g, [](const RankFacts& r) { return r.device.nvlink_island; },
              [](const std::optional<int>& i) {
                return i ? fmt::format("island {}", *i) : std::string("no NVLink");
              }) +
          ")");
  }
  return p;
}

// The cross-node conditions shared by custom and multimem: one NVLink fabric clique.
Problems fabric_clique_problems(const GroupView& g) {
  Problems p;
  require(
      g, p, [](const RankFacts& r) { return r.device.fabric.has_value(); },
      "fabric info unknown (no NVML fabric record)");
  for (FabricState s :
       {FabricState::kNotSupported, FabricState::kNotStarted, FabricState::kInProgress}) {
    require(
        g, p, [s](const RankFacts& r) { return !r.device.fabric || r.device.fabric->state != s; },
        fmt::format("fabric state {}", to_string(s)));
  }
  require(
      g, p,
      [](const RankFacts& r) {
        return !r.device.fabric || r.device.fabric->state != FabricState::kCompleted ||
               r.device.fabric->has_known_cluster();
      },
      "cluster_uuid unknown (absent or all zeros)");
  require(
      g, p,
      [](const RankFacts& r) {
        return !r.device.fabric || r.device.fabric->state != FabricState::kCompleted ||
               r.device.fabric->clique_id.has_value();
      },
      "clique_id unknown");
  // Among ranks whose clique is known: they must all be the same (cluster uuid, clique id); a
  // clique id alone is not unique across clusters.
  using CliqueKey = std::tuple<bool, std::string, std::int64_t>;
  auto key_of = [](const RankFacts& r) -> CliqueKey {
    const auto& f = r.device.fabric;
    if (!f || f->state != FabricState::kCompleted || !f->has_known_cluster() || !f->clique_id) {
      return {false, "", 0};
    }
    return {true, *f->cluster_uuid, *f->clique_id};
  };
  std::set<CliqueKey> known;
  for (const auto& r :
       g.ranks_where([&](const RankFacts& rf) { return std::get<0>(key_of(rf)); })) {
    known.insert(key_of(g.rank(r)));
  }
  if (known.size() > 1) {
    p.add(fmt::format("ranks are in {} different fabric cliques ({})", known.size(),
                      describe_partition<CliqueKey>(g, key_of, [](const CliqueKey& k) {
                        if (!std::get<0>(k)) return std::string("clique unknown");
                        return fmt::format("cluster {} clique {}", std::get<1>(k), std::get<2>(k));
                      })));
  }
  require(
      g, p, [](const RankFacts& r) { return r.device.vmm; }, "vmm false");
  require(
      g, p, [](const RankFacts& r) { return r.device.fabric_handle; },
      "fabric_handle false (memory cannot be exported as fabric handles)");
  return p;
}

std::string spans_nodes(const GroupView& g) {
  return fmt::format("the group spans {} nodes ({}) that are not one NVLink fabric clique: ",
                     g.nodes(), g.host_list());
}

std::optional<std::string> admit_custom(const GroupView& g) {
  const int w = g.world_size();
  if (w > kCustomMaxWorld) {
    return fmt::format("world size {} is above custom's limit of {} ranks", w, kCustomMaxWorld);
  }
  if (g.nodes() > 1) return verdict(fabric_clique_problems(g), spans_nodes(g));
  Problems p;
  require(
      g, p, [](const RankFacts& r) { return r.device.p2p; },
      "p2p false (peer access to the other GPUs of the node does not work)");
  if (one_nvlink_island(g) || (w == 2 && p.empty())) return verdict(p);
  p.append(island_problems(g));
  if (w > 2) {
    p.add(fmt::format(
        "without one NVLink island custom only serves a PCIe pair (world size 2), not {}", w));
  }
  return verdict(p, fmt::format("one node ({}): ", g.host_list()));
}

std::optional<std::string> admit_multimem(const GroupView& g) {
  Problems p;
  require(
      g, p, [](const RankFacts& r) { return r.device.multicast; },
      "multicast false (no NVSwitch multicast objects)");
  require(
      g, p, [](const RankFacts& r) { return *r.device.sm >= kMultimemMinSm; },
      fmt::format("sm below {} (multimem needs Hopper or newer)", kMultimemMinSm));
  if (g.nodes() == 1) {
    p.append(island_problems(g));
    return verdict(p);
  }
  Problems cross = fabric_clique_problems(g);
  require(
      g, cross, [](const RankFacts& r) { return *r.device.sm >= kMultimemCrossNodeMinSm; },
      fmt::format("sm below {} (multimem across nodes needs Blackwell or newer)",
                  kMultimemCrossNodeMinSm));
  if (!cross.empty()) p.add(spans_nodes(g) + cross.text());
  return verdict(p);
}

std::optional<std::string> admit_shm(const GroupView& g) {
  if (g.nodes() == 1) return std::nullopt;
  std::vector<std::string> per_host;
  for (std::size_t h = 0; h < g.hosts().size(); ++h) {
    per_host.push_back(fmt::format("{}: {} {}", g.hosts()[h],
                                   g.ranks_on_host(h).size() == 1 ? "rank" : "ranks",
                                   format_rank_list(g.ranks_on_host(h))));
  }
  return fmt::format("the ranks span {} hosts ({}); shared memory needs all ranks on one host",
                     g.nodes(), fmt::join(per_host, "; "));
}

std::optional<std::string> admit_hier(const GroupView& g) {
  if (g.nodes() == 1) return "all ranks are on one host: shm serves the group without a hierarchy";
  for (std::size_t h = 0; h < g.hosts().size(); ++h) {
    if (g.ranks_on_host(h).size() >= 2) return std::nullopt;
  }
  return fmt::format(
      "every host ({}) has one rank: there is no node-local step to share, gloo carries it",
      g.host_list());
}

// hier with MPI lanes: where hier serves, and only in one MPI world that every rank's facts name
// (a group started by mpirun and bootstrapped through MPI).
std::optional<std::string> admit_hier_mpi(const GroupView& g) {
  if (auto why = admit_hier(g)) return why;
  const auto without = g.ranks_where([](const RankFacts& r) { return !r.mpi.has_value(); });
  if (!without.empty()) {
    const std::string who = static_cast<int>(without.size()) == g.world_size() ? "no rank was"
                            : without.size() == 1 ? g.describe(without) + " was"
                                                  : g.describe(without) + " were";
    return fmt::format(
        "{} bootstrapped through MPI (facts without `mpi`): MPI lanes need the world mpirun "
        "started (mpirun without MASTER_ADDR / MASTER_PORT), gloo carries the lanes",
        who == "no rank was" ? who : who + " not");
  }
  const std::string& library = *g.rank(0).mpi;
  const auto other =
      g.ranks_where([&](const RankFacts& r) { return r.mpi.has_value() && *r.mpi != library; });
  if (!other.empty()) {
    return fmt::format("{} name another MPI library than rank 0's \"{}\": not one MPI world",
                       g.describe(other), library);
  }
  return std::nullopt;
}

void decide_zero_copy(const GroupView& g, Admission& a) {
  if (g.type() != DeviceType::kCuda) {
    a.zero_copy_reason = "cpu backends copy through their own buffers";
    return;
  }
  if (a.verdicts[Backend::kCustom].has_value()) {
    a.zero_copy_reason = "custom is not eligible";
    return;
  }
  if (g.nodes() == 1) {
    a.zero_copy = true;
    a.zero_copy_reason = "one node: user buffers can be shared by IPC handles";
    return;
  }
  // Across nodes a peer's buffer could only be opened from a fabric handle, which registration
  // does not export: saying yes would promise in-place reads that never happen (and graph
  // thresholds tuned for them). Calls copy into the workspace, which custom shares by fabric
  // handles already.
  a.zero_copy_reason =
      "a group across nodes would need user buffers exported as fabric handles, which "
      "registration does not do; calls copy into the workspace";
}

}  // namespace

Admission admit(const GroupView& g, const PlanOptions& options) {
  Admission a;
  const bool single = g.world_size() == 1;
  const std::string one_rank = "world size 1: nothing to exchange, the local copy serves it";
  for (Backend b : backends_of(g.type())) {
    std::optional<std::string> v;
    if (b == Backend::kLocal) {
      if (!single) {
        v = fmt::format("world size {}: local only serves a group of one rank", g.world_size());
      }
    } else if (b == fallback_backend(g.type())) {
      v = std::nullopt;  // the fallback engine is always eligible (docs/plan.md)
    } else if (single) {
      v = one_rank;
    } else if (b == Backend::kCustom) {
      v = admit_custom(g);
    } else if (b == Backend::kMultimem) {
      v = admit_multimem(g);
    } else if (b == Backend::kShm) {
      v = admit_shm(g);
    } else if (b == Backend::kHier) {
      v = admit_hier(g);
    } else if (b == Backend::kHierMpi) {
      v = admit_hier_mpi(g);
    }
    if (auto it = options.disabled.find(b); it != options.disabled.end()) {
      v = fmt::format("disabled by {}", it->second) + (v ? "; besides: " + *v : "");
    }
    a.verdicts[b] = v;
  }
  decide_zero_copy(g, a);
  return a;
}

}  // namespace tpcomm::plan
