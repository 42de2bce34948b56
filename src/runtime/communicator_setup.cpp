// Creating a communicator (docs/architecture.md, "From facts to a kernel"): probe -> facts exchange
// -> node identity -> plan -> digest vote -> set-up of each backend the tables use, with an AND
// vote after every step -> ready. Every step is collective and has a deadline; every error is
// raised on every rank, so no rank goes on alone into a step the others will never reach.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "common/fork_generation.hpp"
#include "common/log_format.hpp"
#include "common/rank_list.hpp"
#include "common/text_file.hpp"
#include "communicator_state.hpp"
#include "control/launched_bootstrap.hpp"
#include "control/mpi_world.hpp"
#include "control/socket_util.hpp"
#include "facts_exchange.hpp"
#include "node_identity.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/facts_json.hpp"
#include "tpcomm/probe.hpp"
#include "tpcomm/tuning_file.hpp"
#include "tpcomm/version.hpp"
#include "transport/cpu/thread_team.hpp"

namespace tpcomm {

struct CommunicatorFactory {
  static std::unique_ptr<Communicator> wrap(std::unique_ptr<runtime::CommunicatorState> impl) {
    return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
  }
};

namespace {

using runtime::BackendContext;
using runtime::BackendFactory;
using runtime::CommunicatorState;
using runtime::FaultAction;

// The CUDA device of a kCuda communicator's rank: the option, else LOCAL_RANK modulo the
// visible devices.
int pick_cuda_device(const CommunicatorOptions& options, std::size_t visible) {
  if (options.cuda_device >= 0) {
    if (static_cast<std::size_t>(options.cuda_device) >= visible) {
      throw invalid_input(fmt::format("CommunicatorOptions::cuda_device {}: only {} visible",
                                      options.cuda_device, visible));
    }
    return options.cuda_device;
  }
  const std::int64_t local_rank = env_raw("LOCAL_RANK") ? env_integer("LOCAL_RANK") : 0;
  return static_cast<int>(static_cast<std::size_t>(local_rank) % visible);
}

runtime::RankRecord my_record(const Bootstrap& bootstrap, const CommunicatorOptions& options,
                              const runtime::Platform& platform, int* cuda_device) {
  const int rank = bootstrap.rank();
  LocalFacts local = platform.probe();
  runtime::RankRecord r;
  r.facts.host = local.host.hostname;
  std::string no_mpi;
  if (auto world = control::mpi_world_of(bootstrap, &no_mpi)) {
    r.facts.mpi = world->library.empty() ? std::string("MPI") : world->library;
  } else {
    TPCOMM_LOG(kDebug, "facts", "rank {}: no MPI world for hier_mpi: {}", rank, no_mpi);
  }
  if (options.device == DeviceType::kCuda) {
    // Refused here, on this rank, before any peer waits on a GPU step: the facts exchange then
    // fails everywhere naming this rank.
    if (std::string why = platform.gpu_unavailable_reason(); !why.empty()) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("rank {}: a CUDA communicator cannot be created: {}", rank, why));
    }
    if (local.gpus.empty()) {
      throw Error(
          ErrorCode::kUnavailable,
          fmt::format("rank {}: a CUDA communicator needs a GPU: {}", rank, local.cuda_status));
    }
    *cuda_device = pick_cuda_device(options, local.gpus.size());
    r.facts.device = local.gpus[static_cast<std::size_t>(*cuda_device)];
  } else {
    r.facts.device.type = DeviceType::kCpu;  // host memory
    r.facts.device.numa = local.numa;
    r.facts.device.isa = local.cpu_isa;
  }
  r.boot_id = local.host.boot_id;
  if (rank == 0) {
    std::random_device rd;
    r.comm_id = (static_cast<std::uint64_t>(rd()) << 32) | rd();
  }
  return r;
}

std::vector<runtime::RankRecord> exchange_facts(CommunicatorState& c,
                                                const CommunicatorOptions& options,
                                                const runtime::Platform& platform) {
  Bytes mine = runtime::encode_record(my_record(*c.bootstrap, options, platform, &c.cuda_device));
  if (c.faults.hits("facts", FaultAction::kCorrupt)) mine.resize(mine.size() - 7);  // truncated
  c.faults.apply_fail_or_stall("facts");
  auto all = c.bootstrap->all_gather(mine, "facts exchange", c.deadline());
  std::vector<runtime::RankRecord> records;
  for (int r = 0; r < c.bootstrap->size(); ++r) {
    records.push_back(runtime::decode_record(all[static_cast<std::size_t>(r)], r));
  }
  return records;
}

// Which ranks share a node: same boot id and each sees the other's shared-memory segment. The
// segment exists only between two back-to-back rounds that every rank has already reached, so
// a rank killed at any moment is very unlikely to leave it behind (and tpcomm run removes what a
// killed rank left, see docs/errors.md).
std::vector<int> identify_nodes(CommunicatorState& c,
                                const std::vector<runtime::RankRecord>& records) {
  const int rank = c.bootstrap->rank();
  const auto n = records.size();
  c.faults.apply_fail_or_stall("node_probe");
  runtime::NodeProbeSegment segment;
  const std::string mine = segment.name() + "\n" + segment.token();
  auto names = c.bootstrap->all_gather(Bytes(mine.begin(), mine.end()), "node probe", c.deadline());
  Bytes row(n, 0);
  for (std::size_t j = 0; j < n; ++j) {
    const std::string entry(names[j].begin(), names[j].end());
    const auto newline = entry.find('\n');
    row[j] = static_cast<int>(j) == rank ||
             (records[j].boot_id == records[static_cast<std::size_t>(rank)].boot_id &&
              newline != std::string::npos &&
              runtime::can_see_segment(entry.substr(0, newline), entry.substr(newline + 1)));
  }
  auto rows = c.bootstrap->all_gather(row, "node identity", c.deadline());
  segment.remove();  // every rank has probed: nobody needs it any more
  std::vector<std::vector<bool>> sees(n, std::vector<bool>(n));
  for (std::size_t i = 0; i < n; ++i) {
    if (rows[i].size() != n)
      throw invalid_input(fmt::format("node identity row from rank {} is corrupt", i));
    for (std::size_t j = 0; j < n; ++j) sees[i][j] = rows[i][j] != 0;
  }
  return runtime::group_nodes(sees);
}

FactsTable group_facts(const std::vector<runtime::RankRecord>& records,
                       const std::vector<int>& node_of) {
  // A node is named after its lowest rank's hostname; two nodes with one hostname (containers)
  // get "#<lowest rank>" appended so they stay apart.
  std::map<int, int> lowest;
  for (std::size_t r = 0; r < node_of.size(); ++r) lowest.emplace(node_of[r], static_cast<int>(r));
  std::map<std::string, int> name_uses;
  for (const auto& [node, r] : lowest) ++name_uses[records[static_cast<std::size_t>(r)].facts.host];
  FactsTable t;
  t.comment = fmt::format(
      "gathered by tpcomm {}: {} ranks on {} nodes (node identity: boot id and a "
      "shared-memory probe)",
      kVersion, records.size(), lowest.size());
  for (std::size_t r = 0; r < records.size(); ++r) {
    RankFacts f = records[r].facts;
    const int first = lowest[node_of[r]];
    const std::string& name = records[static_cast<std::size_t>(first)].facts.host;
    f.host = name_uses[name] > 1 ? fmt::format("{}#{}", name, first) : name;
    t.ranks.push_back(std::move(f));
  }
  return t;
}

// A failure to write is a warning: the dump is a by-product of creation, which goes on.
void dump_facts(const FactsTable& facts) {
  auto path = env_raw("TPCOMM_DUMP_FACTS");
  if (!path) return;
  try {
    common::replace_text_file(*path, encode_facts(facts));
  } catch (const Error& e) {
    TPCOMM_LOG(kWarn, "comm", "TPCOMM_DUMP_FACTS: {}", e.what());
  }
}

// `input_failure`: this rank's plan inputs were bad (read_plan_inputs). It still takes part,
// with the failure in place of its digest, so every rank fails with the reason instead of waiting.
void agree_on_digest(CommunicatorState& c, const std::optional<std::string>& input_failure) {
  // Both tables of a kCuda communicator: a rank with a different graph table would pick another
  // backend for the same captured call.
  std::string digest = c.eager_plan.digest;
  if (c.graph_plan.digest != digest) digest += "+" + c.graph_plan.digest;
  if (c.faults.hits("digest", FaultAction::kCorrupt)) digest = "0000000000000000";
  if (input_failure) digest = "!" + *input_failure;
  c.faults.apply_fail_or_stall("digest");
  auto all =
      c.bootstrap->all_gather(Bytes(digest.begin(), digest.end()), "plan agreement", c.deadline());
  std::map<std::string, std::vector<int>> by_digest;
  for (std::size_t r = 0; r < all.size(); ++r) {
    by_digest[std::string(all[r].begin(), all[r].end())].push_back(static_cast<int>(r));
  }
  std::vector<std::string> failures;
  for (const auto& [d, ranks] : by_digest) {
    if (!d.empty() && d[0] == '!')
      failures.push_back(fmt::format("{}: {}", common::rank_set_text(ranks), d.substr(1)));
  }
  if (!failures.empty()) throw invalid_input(fmt::format("no plan: {}", fmt::join(failures, "; ")));
  if (by_digest.size() == 1) return;
  std::vector<std::string> parts;
  for (const auto& [d, ranks] : by_digest)
    parts.push_back(fmt::format("{} computed {}", common::rank_set_text(ranks), d));
  throw Error(
      ErrorCode::kMismatch,
      fmt::format("the ranks disagree on the plan: {}. The same facts gave different plans: "
                  "do all ranks run the same tpcomm version with the same TPCOMM_TUNING, "
                  "TPCOMM_DISABLE and deterministic mode (TPCOMM_DETERMINISTIC)?",
                  fmt::join(parts, "; ")));
}

// Where this rank's peers reach its sockets (gloo): TPCOMM_SOCKET_ADDRESS, else loopback when
// every rank is on this machine, else this host's address on the route to the store's host.
std::string socket_address(const std::vector<runtime::RankRecord>& records) {
  if (auto a = env_raw("TPCOMM_SOCKET_ADDRESS")) return *a;
  const bool one_machine = std::all_of(records.begin(), records.end(), [&](const auto& r) {
    return r.boot_id == records[0].boot_id;
  });
  auto master = env_raw("MASTER_ADDR");
  if (one_machine || !master) return "127.0.0.1";
  return net::address_toward(*master).value_or("127.0.0.1");
}

// This rank's inputs to the plan: mode, disabled backends, tuning overrides. A bad input (an
// unknown or fallback backend in TPCOMM_DISABLE or the options, an unreadable TPCOMM_TUNING) is
// returned, not thrown: the plan agreement then fails on every rank with it, so none waits.
std::optional<std::string> read_plan_inputs(CommunicatorState& c,
                                            const CommunicatorOptions& options,
                                            const std::map<Backend, BackendFactory>& factories) {
  c.plan_options.mode = options.mode;
  c.plan_options.deterministic = options.deterministic.value_or(env_flag("TPCOMM_DETERMINISTIC"));
  for (Backend b : backends_of(c.facts.ranks.at(0).device.type)) {
    if (!factories.contains(b)) c.plan_options.disabled[b] = "not available in this build yet";
  }
  try {
    for (Backend b : parse_disabled_backends(env_string("TPCOMM_DISABLE"), "TPCOMM_DISABLE")) {
      c.plan_options.disabled[b] = "TPCOMM_DISABLE";
    }
    if (options.threads &&
        (*options.threads < 0 || *options.threads > transport::cpu::kMaxTeamThreads)) {
      throw invalid_input(
          fmt::format("CommunicatorOptions::threads = {}: expected 0 (the default "
                      "share of the rank's CPUs) to {}",
                      *options.threads, transport::cpu::kMaxTeamThreads));
    }
    for (Backend b : options.disabled) {
      if (b == fallback_backend(DeviceType::kCuda) || b == fallback_backend(DeviceType::kCpu)) {
        throw invalid_input(
            fmt::format("CommunicatorOptions::disabled: {} cannot be disabled: it "
                        "is the fallback engine that every group can use",
                        to_string(b)));
      }
      c.plan_options.disabled[b] = "CommunicatorOptions::disabled";
    }
    c.tuning = tuning_from_env();
  } catch (const Error& e) {
    return e.what();
  }
  return std::nullopt;
}

BackendContext backend_context(CommunicatorState& c,
                               const std::vector<runtime::RankRecord>& records,
                               const std::vector<int>& node_of) {
  BackendContext context;
  context.rank = c.bootstrap->rank();
  context.size = c.bootstrap->size();
  context.bootstrap = c.bootstrap;
  context.comm_id = c.comm_id;
  context.timeout = c.timeout;
  context.cuda.kernel_timeout = std::chrono::milliseconds(env_integer("TPCOMM_KERNEL_TIMEOUT_MS"));
  context.socket_address = socket_address(records);
  context.node_of_rank = node_of;
  context.shm.workspace_bytes = static_cast<std::size_t>(env_integer("TPCOMM_SHM_WORKSPACE"));
  context.cuda.graph_slots = static_cast<std::size_t>(env_integer("TPCOMM_GRAPH_SLOTS"));
  context.shm.single_copy = env_flag("TPCOMM_SHM_SINGLE_COPY");
  context.shm.streaming_fill_bytes = env_integer("TPCOMM_SHM_STREAMING_FILL");
  context.shm.spin = std::chrono::microseconds(env_integer("TPCOMM_SHM_SPIN_US"));
  context.shm.stage_times = env_flag("TPCOMM_SHM_STAGE_TIMES");
  context.shm.threads = c.options.threads.value_or(static_cast<int>(env_integer("TPCOMM_THREADS")));
  context.shm.team_min_bytes =
      static_cast<std::size_t>(find_team_min_bytes(c.tuning, context.size));
  const std::string& mine = records.at(static_cast<std::size_t>(context.rank)).boot_id;
  context.ranks_on_this_machine = static_cast<int>(std::count_if(
      records.begin(), records.end(), [&](const auto& r) { return r.boot_id == mine; }));
  context.cuda.device = c.cuda_device;
  context.cuda.zero_copy = c.graph_plan.ops.at(Op::kAllReduce).zero_copy;
  context.shm.registered = c.heap;
  CommunicatorState* impl = &c;
  context.on_async_failure = [impl](const std::string& why) {
    impl->group_abort.abort_with(
        Error(ErrorCode::kTimeout, fmt::format("rank {}: {}", impl->bootstrap->rank(), why)));
  };
  return context;
}

}  // namespace

void runtime::CommunicatorState::make_plans() {
  plan = make_plan(facts, plan_options, tuning);
  eager_plan = plan;
  graph_plan = plan;
  if (plan.device_type == DeviceType::kCuda) {
    PlanOptions other = plan_options;
    other.mode = plan_options.mode == Mode::kGraph ? Mode::kEager : Mode::kGraph;
    (other.mode == Mode::kGraph ? graph_plan : eager_plan) = make_plan(facts, other, tuning);
  }
}

namespace runtime {

namespace {

std::unique_ptr<Communicator> build_communicator(std::shared_ptr<Bootstrap> bootstrap,
                                                 const CommunicatorOptions& options,
                                                 const Platform& platform) {
  if (!bootstrap) throw invalid_input("Communicator::create: the bootstrap is null");
  auto c = std::make_unique<CommunicatorState>(std::move(bootstrap));
  c->timeout = options.timeout.value_or(default_timeout());
  // Every store request of this communicator waits at most its deadline, not the environment's.
  c->bootstrap->store()->set_request_timeout(c->timeout);
  c->faults = runtime::FaultPlan::from_env(c->bootstrap->rank());
  c->check_calls = env_flag("TPCOMM_CHECK");
  c->options = options;
  c->platform = std::make_shared<const Platform>(platform);

  const auto started = Deadline::Clock::now();
  auto phase = [&](const char* what) {
    TPCOMM_LOG(kDebug, "comm", "rank {}: {} done after {:.1f} ms", c->bootstrap->rank(), what,
               std::chrono::duration<double, std::milli>(Deadline::Clock::now() - started).count());
  };
  auto records = exchange_facts(*c, options, platform);
  phase("facts exchange");
  auto node_of = platform.node_of_ranks ? platform.node_of_ranks(c->bootstrap->size())
                                        : identify_nodes(*c, records);
  phase("node identity");
  c->facts = group_facts(records, node_of);
  if (c->bootstrap->rank() == 0) dump_facts(c->facts);

  auto input_failure = read_plan_inputs(*c, options, platform.factories);
  c->make_plans();
  agree_on_digest(*c, input_failure);
  phase("plan agreement");

  c->comm_id = records[0].comm_id;
  c->group_abort.identify(c->comm_id, control::read_served_by(*c->bootstrap->store()));
  c->bootstrap->store()->set_ephemeral(c->group_abort.presence_key(c->bootstrap->rank()), Bytes{1});
  c->heap = std::make_shared<transport::shm::RegisteredHeap>(c->bootstrap->rank(),
                                                             c->bootstrap->size(), c->comm_id);
  const BackendContext context = backend_context(*c, records, node_of);
  set_up_backends(*c, platform.factories, context);
  // The same on every rank: set-up was voted.
  c->heap->share_with_peers(c->backends.has(Backend::kShm));
  phase("backend set-up");
  TPCOMM_LOG(kInfo, "comm", "rank {} of {}: ready, plan {}", context.rank, context.size,
             c->plan.digest);
  return CommunicatorFactory::wrap(std::move(c));
}

}  // namespace

std::unique_ptr<Communicator> create_communicator(std::shared_ptr<Bootstrap> bootstrap,
                                                  const CommunicatorOptions& options,
                                                  const Platform& platform) {
  // std::system_error (a thread that cannot start), std::bad_alloc, ...: the API's one
  // exception type; the peers time out in the next step naming this rank.
  const int rank = bootstrap ? bootstrap->rank() : -1;
  return common::only_tpcomm_errors(fmt::format("rank {}: Communicator::create", rank), [&] {
    return build_communicator(std::move(bootstrap), options, platform);
  });
}

}  // namespace runtime

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<Bootstrap> bootstrap,
                                                   const CommunicatorOptions& options) {
  return runtime::create_communicator(std::move(bootstrap), options, runtime::builtin_platform());
}

}  // namespace tpcomm
