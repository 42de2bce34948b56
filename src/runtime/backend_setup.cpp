// Setting up the backends the plan uses (communicator_setup.cpp calls it last): each backend's
// steps in order, an AND vote after every step, and a replan when a backend fails anywhere.
#include <algorithm>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "communicator_state.hpp"

namespace tpcomm::runtime {
namespace {

// An AND vote: nullopt when every rank succeeded, else who failed and why.
std::optional<std::string> vote(CommunicatorState& c, const std::optional<std::string>& failure,
                                const std::string& step) {
  // "1" for success, "0<reason>" for failure.
  const std::string text = failure ? "0" + *failure : std::string("1");
  auto all = c.bootstrap->all_gather(Bytes(text.begin(), text.end()), "set-up vote on " + step,
                                     c.deadline());
  std::vector<std::string> failed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string got(all[r].begin(), all[r].end());
    if (got != "1")
      failed.push_back(fmt::format("rank {}: {}", r, got.empty() ? "no vote" : got.substr(1)));
  }
  if (failed.empty()) return std::nullopt;
  return fmt::format("step {} failed on {}", step, fmt::join(failed, "; "));
}

// The backends the eager and graph tables use that are not set up yet (not the fallback where the
// caller serves its calls).
std::vector<Backend> backends_needed(const CommunicatorState& c) {
  std::vector<Backend> needed;
  const Backend fallback = fallback_backend(c.plan.device_type);
  for (const Plan* plan : {&c.eager_plan, &c.graph_plan}) {
    for (const auto& [op, p] : plan->ops) {
      for (const auto& row : p.table) {
        if (c.options.caller_serves_fallback && row.backend == fallback) continue;
        if (!c.backends.has(row.backend) &&
            std::find(needed.begin(), needed.end(), row.backend) == needed.end()) {
          needed.push_back(row.backend);
        }
      }
    }
  }
  return needed;
}

// Runs every set-up step of one backend with a vote after each; the first failed vote's text.
std::optional<std::string> run_voted_steps(CommunicatorState& c,
                                           transport::CollectiveBackend& backend) {
  for (int step = 0; step < backend.setup_steps(); ++step) {
    const std::string name = backend.setup_step_name(step);
    std::optional<std::string> mine;
    try {
      backend.run_setup_step(step, c.deadline());
      // Injected after the step so that the rank still took part in any rendezvous in it.
      c.faults.apply_fail_or_stall(name);
    } catch (const std::exception& e) {
      mine = e.what();
    }
    if (auto failed = vote(c, mine, name)) return failed;
  }
  return std::nullopt;
}

}  // namespace

// Sets up every backend the size tables use, voting after each step. A backend whose step
// fails anywhere is disabled everywhere and the plan is recomputed (identically on every rank);
// the fallback engine failing is an error.
void set_up_backends(CommunicatorState& c, const std::map<Backend, BackendFactory>& factories,
                     const BackendContext& context) {
  const Backend fallback = fallback_backend(c.plan.device_type);
  for (auto needed = backends_needed(c); !needed.empty(); needed = backends_needed(c)) {
    bool replan = false;
    for (Backend b : needed) {
      auto factory = factories.find(b);
      if (factory == factories.end()) {
        throw Error(ErrorCode::kInternal,
                    fmt::format("plan uses {} but this build has no such backend", to_string(b)));
      }
      auto backend = factory->second(context);
      if (auto failed = run_voted_steps(c, *backend)) {
        if (b == fallback) {
          throw Error(
              ErrorCode::kUnavailable,
              fmt::format("the fallback engine {} could not be set up: {}", to_string(b), *failed));
        }
        TPCOMM_LOG(kWarn, "comm", "rank {}: {} disabled on every rank: {}", context.rank,
                   to_string(b), *failed);
        c.plan_options.disabled[b] = "its set-up: " + *failed;
        replan = true;
        continue;
      }
      backend->setup_complete();
      c.backends.add(b, std::move(backend));
    }
    if (replan) c.make_plans();
  }
}

}  // namespace tpcomm::runtime
