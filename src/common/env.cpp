// The environment registry: names, kinds, defaults and meanings, and validated access.
#include "tpcomm/env.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "env_launch_table.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm {
namespace {

// Every backend but the fallback engines (nccl, gloo), which every group can always use.
std::vector<std::string_view> disableable_backend_names() {
  std::vector<std::string_view> names;
  for (const auto& [backend, name] : Names<Backend>::table) {
    if (backend != Backend::kNccl && backend != Backend::kGloo) names.push_back(name);
  }
  return names;
}

// tpcomm's own variables, then the launchers' (env_launch_table.cpp).
std::vector<EnvVar> with_launch_variables(std::vector<EnvVar> own) {
  const auto& launch = common::launch_env_table();
  own.insert(own.end(), launch.begin(), launch.end());
  return own;
}

}  // namespace

const std::vector<EnvVar>& env_registry() {
  static const std::vector<EnvVar> registry = with_launch_variables({
      {"TPCOMM_LOG",
       EnvKind::kChoice,
       "warn",
       "log level of messages written to stderr (or TPCOMM_LOG_FILE)",
       {"error", "warn", "info", "debug"}},
      {"TPCOMM_LOG_SUBSYS",
       EnvKind::kList,
       "",
       "only log these subsystems (comma list, e.g. probe,plan); unset: all",
       {}},
      {"TPCOMM_LOG_FILE",
       EnvKind::kPath,
       "",
       "append log lines to this file instead of stderr (a program's own sink overrides both)",
       {}},
      {"TPCOMM_TIMEOUT_MS",
       EnvKind::kInteger,
       "60000",
       "deadline of every blocking wait, in milliseconds",
       {},
       1,
       86'400'000},
      {"TPCOMM_KERNEL_TIMEOUT_MS",
       EnvKind::kInteger,
       "600000",
       "how long a GPU kernel (custom, multimem) waits for a peer before it gives up and fails the "
       "group, in milliseconds (separate from TPCOMM_TIMEOUT_MS: a host stall shorter than this "
       "does not fail the kernels)",
       {},
       1,
       86'400'000},
      {"TPCOMM_TUNING",
       EnvKind::kPath,
       "",
       "tuning override file (docs/tuning.md) used instead of the built-in size tables",
       {}},
      {"TPCOMM_DUMP_FACTS",
       EnvKind::kPath,
       "",
       "write the group's gathered facts to this file (facts v1, replayable by tpcomm plan)",
       {}},
      {"TPCOMM_CHECK",
       EnvKind::kFlag,
       "0",
       "1: verify every call's op, dtype, count and sequence across ranks before running it",
       {}},
      {"TPCOMM_SGLANG_TAKEOVER",
       EnvKind::kFlag,
       "0",
       "1: tpcomm's SGLang plugin replaces SGLang's own CUDA custom all-reduce (the SGLang "
       "features gated on its class then turn off, logged once; docs/engines.md); 0: SGLang keeps "
       "its own on CUDA",
       {}},
      {"TPCOMM_DETERMINISTIC",
       EnvKind::kFlag,
       "0",
       "1: every reduction sums in rank order 0..W-1 whatever its size, algorithm, chunking, "
       "threads or node layout (backends that cannot gather their inputs and reduce here; in the "
       "plan's digest, so every rank must agree); 0: each backend's fastest order",
       {}},
      {"TPCOMM_DISABLE", EnvKind::kList, "",
       "backends never to use (comma list); nccl and gloo, the fallbacks, cannot be disabled",
       disableable_backend_names()},
      {"TPCOMM_SHM_SINGLE_COPY",
       EnvKind::kFlag,
       "1",
       "0: shm's all-gather always copies through the lanes; 1: it reads peers' inputs directly "
       "(process_vm_readv) where a set-up probe shows the kernel allows it",
       {}},
      {"TPCOMM_SHM_STAGE_TIMES",
       EnvKind::kFlag,
       "0",
       "1: shm clocks each protocol step's parts (fill, wait, consume) for stage_times() and "
       "tpcomm bench's stage table, at two clock reads per part; 0: it does not",
       {}},
      {"TPCOMM_SHM_WORKSPACE",
       EnvKind::kInteger,
       "2097152",
       "bytes of shared memory per rank for the shm backend: two lanes of half that, used in turn "
       "(larger messages stream through them in steps of 512 KiB, or of the plan's step_bytes, "
       "at most a lane)",
       {},
       4096,
       1LL << 30},
      {"TPCOMM_SHM_STREAMING_FILL",
       EnvKind::kInteger,
       "-1",
       "shm all-reduces of at least this many bytes fill their lanes with streaming "
       "(non-temporal) stores, so peers read them from memory instead of from this core's "
       "cache; 0: never; -1: never for 2 ranks (whose slots take turns), 16777216 for more",
       {},
       -1,
       1LL << 40},
      {"TPCOMM_SHM_SPIN_US",
       EnvKind::kInteger,
       "1000",
       "microseconds a rank waiting in an shm call spins before it yields and then sleeps, "
       "while every rank has a CPU of its own (ranks outnumbering CPUs yield at once); it spins "
       "on, up to 20 ms, while the late peers are runnable on other CPUs; 0: yield at once",
       {},
       0,
       10'000'000},
      {"TPCOMM_THREADS",
       EnvKind::kInteger,
       "0",
       "threads of a rank that split each shm call of at least the tuning table's "
       "team_min_bytes (262144 when no entry says); 0: the rank's CPUs shared evenly among the "
       "ranks that may run on them (1 when a rank has one CPU); the workers sleep between calls",
       {},
       0,
       256},
      {"TPCOMM_GRAPH_SLOTS",
       EnvKind::kInteger,
       "16384",
       "captured calls per CUDA communicator whose buffers register_graph_buffers() may share "
       "(136 bytes of device memory each); later captures copy",
       {},
       16,
       1 << 20},
      {"TPCOMM_SOCKET_ADDRESS",
       EnvKind::kString,
       "",
       "address this rank's gloo connections bind to and peers dial; default: 127.0.0.1 when "
       "every rank is on one machine, else this host's address on the route to MASTER_ADDR",
       {}},
      {"TPCOMM_STORE_SECRET",
       EnvKind::kString,
       "",
       "the group's shared secret: the store and every rank prove it in the handshake (tpcomm "
       "run makes one for its ranks; docs/store.md)",
       {},
       0,
       INT64_MAX,
       false,
       true},
      {"TPCOMM_STORE_SECRET_FILE",
       EnvKind::kPath,
       "",
       "file whose first line is the store secret, when TPCOMM_STORE_SECRET is unset",
       {}},
      {"TPCOMM_GROUP_ID",
       EnvKind::kString,
       "",
       "names this group on its store, so groups sharing one store stay apart (tpcomm run sets "
       "it; default: TORCHELASTIC_RUN_ID or the MPI job, else a token rank 0 claims the store "
       "with)",
       {}},
      {"TPCOMM_CPU_KERNELS",
       EnvKind::kChoice,
       "auto",
       "the shm reduction variant: auto (the best this CPU runs), or avx512bf16, avx512, avx2, "
       "baseline to measure another (refused when this CPU cannot run it)",
       {"auto", "avx512bf16", "avx512", "avx2", "baseline"}},
      {"TPCOMM_STORE_PORT",
       EnvKind::kInteger,
       "",
       "port of tpcomm's store on MASTER_ADDR (tpcomm run sets it, and leaves MASTER_PORT to "
       "torch.distributed's store); default MASTER_PORT, or MASTER_PORT + 2 under torchrun, "
       "whose own store holds MASTER_PORT",
       {},
       1,
       65535},
      {"TPCOMM_FAULT",
       EnvKind::kString,
       "",
       "debugging aid: make a step fail, stall, corrupt or run out of memory (oom) on one "
       "rank, e.g. facts:corrupt@1 (docs/errors.md)",
       {}},
      {"TPCOMM_MPI_PLUGIN",
       EnvKind::kString,
       "",
       "path of libtpcomm_mpi.so, which the MPI bootstrap opens when a group is bootstrapped "
       "through mpirun (default: beside libtpcomm, then the build's and the install's lib "
       "folders; docs/packaging.md)",
       {}},
  });
  return registry;
}

const EnvVar& env_var(std::string_view name) {
  for (const auto& var : env_registry()) {
    if (var.name == name) return var;
  }
  throw Error(ErrorCode::kInternal,
              fmt::format("environment variable {} is not in the registry (a tpcomm bug)", name));
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  std::string item;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (text[i] != ' ' && text[i] != '\t') {
      item.push_back(text[i]);
    }
  }
  return out;
}

namespace {

bool parse_integer(std::string_view text, std::int64_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

std::string join_choices(const std::vector<std::string_view>& choices) {
  return fmt::format("{}", fmt::join(choices, ", "));
}

}  // namespace

std::string env_value_problem(const EnvVar& var, std::string_view value) {
  switch (var.kind) {
    case EnvKind::kString:
    case EnvKind::kPath:
      return {};
    case EnvKind::kInteger: {
      std::int64_t n = 0;
      if (!parse_integer(value, n)) return "expected an integer";
      if (n < var.min_value || n > var.max_value) {
        return fmt::format("expected an integer from {} to {}", var.min_value, var.max_value);
      }
      return {};
    }
    case EnvKind::kFlag:
      if (value == "0" || value == "1") return {};
      return "expected 0 or 1";
    case EnvKind::kChoice:
      if (std::find(var.choices.begin(), var.choices.end(), value) != var.choices.end()) return {};
      return fmt::format("expected one of {}", join_choices(var.choices));
    case EnvKind::kList:
      if (var.choices.empty()) return {};
      for (const auto& item : split_list(value)) {
        if (std::find(var.choices.begin(), var.choices.end(), item) == var.choices.end()) {
          return fmt::format("'{}' is not one of {}", item, join_choices(var.choices));
        }
      }
      return {};
  }
  return {};
}

std::optional<std::string> env_raw(std::string_view name) {
  const EnvVar& var = env_var(name);
  const char* value = std::getenv(std::string(var.name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

namespace {

std::string validated(std::string_view name) {
  const EnvVar& var = env_var(name);
  auto raw = env_raw(name);
  if (!raw) return std::string(var.default_value);
  std::string problem = env_value_problem(var, *raw);
  if (!problem.empty()) {
    throw invalid_input(
        fmt::format("{}={}: {} (tpcomm env lists every variable)", var.name, *raw, problem));
  }
  return *raw;
}

}  // namespace

std::string env_string(std::string_view name) {
  return validated(name);
}

std::int64_t env_integer(std::string_view name) {
  std::string text = validated(name);
  std::int64_t n = 0;
  if (!parse_integer(text, n)) {
    throw invalid_input(fmt::format("{} is not set and has no default", name));
  }
  return n;
}

bool env_flag(std::string_view name) {
  return validated(name) == "1";
}

std::vector<std::string> env_list(std::string_view name) {
  return split_list(validated(name));
}

}  // namespace tpcomm
