// Link faults at their time (link_fault_schedule.hpp).
#include "link_fault_schedule.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::cli {

LinkFaultSchedule::LinkFaultSchedule(std::vector<LinkFault> faults, const NodeNetwork* network)
    : faults_(std::move(faults)), network_(network) {
  std::stable_sort(faults_.begin(), faults_.end(),
                   [](const LinkFault& a, const LinkFault& b) { return a.after < b.after; });
}

std::optional<std::string> LinkFaultSchedule::apply_due(
    std::chrono::steady_clock::duration since_start) {
  for (; next_ < faults_.size() && faults_[next_].after <= since_start; ++next_) {
    const LinkFault& f = faults_[next_];
    if (network_ == nullptr) return fmt::format("{} needs the node network", option_of(f.kind));
    try {
      network_->apply(f);
    } catch (const Error& e) {
      return fmt::format("{} {}@{:.1f} could not be put: {}", option_of(f.kind), f.node,
                         static_cast<double>(f.after.count()) / 1000, e.what());
    }
    const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::cerr << fmt::format("tpcomm run: node {} {} at {} ({:.1f} s after the ranks started)\n",
                             f.node, effect_of(f.kind), wall.count(),
                             std::chrono::duration<double>(since_start).count())
              << std::flush;
  }
  return std::nullopt;
}

}  // namespace tpcomm::cli
