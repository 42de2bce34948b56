// Counting the ranks that may run on a rank's CPUs.
#include "team_size.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace tpcomm::transport::cpu {

TeamSize team_size(int requested, const std::vector<cpu_set_t>& group, int self,
                   int ranks_on_machine, int online) {
  const cpu_set_t& mine = group[static_cast<std::size_t>(self)];
  const int cpus = CPU_COUNT(&mine);
  auto unit = [](int n) { return n == 1 ? "thread" : "threads"; };
  if (requested > 0) {
    return {requested, fmt::format("{} {} (TPCOMM_THREADS or CommunicatorOptions::threads; this "
                                   "rank may run on {} CPUs)",
                                   requested, unit(requested), cpus)};
  }
  int sharers = 0;
  for (const cpu_set_t& theirs : group) {
    cpu_set_t both;
    CPU_AND(&both, &mine, &theirs);
    if (CPU_COUNT(&both) > 0) ++sharers;
  }
  const bool unbound = cpus >= online;
  if (unbound) sharers = std::max(sharers, ranks_on_machine);
  sharers = std::max(sharers, 1);
  const int threads = std::max(1, cpus / sharers);
  return {threads, fmt::format("{} {} ({} CPUs{} shared by {} ranks)", threads, unit(threads), cpus,
                               unbound ? " (not bound)" : "", sharers)};
}

}  // namespace tpcomm::transport::cpu
