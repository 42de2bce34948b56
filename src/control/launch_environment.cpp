// The bootstrap of a process started by tpcomm run, torchrun, mpirun or srun (docs/store.md; the
// launchers' variables: `tpcomm env`): the store at MASTER_ADDR:MASTER_PORT (rank 0 serves it when
// nobody else does), the group's secret proved to it, and the group's own scope on it.
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "common/foreign_error.hpp"
#include "common/log_format.hpp"
#include "group_scope.hpp"
#include "launched_bootstrap.hpp"
#include "slurm_environment.hpp"
#include "socket_util.hpp"
#include "store_auth.hpp"
#include "store_keys.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

std::optional<std::int64_t> first_of(const char* a, const char* b) {
  if (env_raw(a)) return env_integer(a);
  if (env_raw(b)) return env_integer(b);
  return std::nullopt;
}

// Where rank 0 listens: the address the ranks dial (MASTER_ADDR) when it is this host's, so a
// loopback MASTER_ADDR keeps the store off the network; any interface only when MASTER_ADDR is a
// loopback name here but ranks run on other nodes. nullopt: MASTER_ADDR is another host's.
std::optional<std::string> store_bind_address(const std::string& master_addr, bool all_local) {
  auto ip = net::resolve_ipv4(master_addr);
  if (!ip || net::why_cannot_listen_on(*ip)) return std::nullopt;
  if (!net::is_loopback(*ip)) return ip;
  return all_local ? ip : std::optional<std::string>("0.0.0.0");
}

// Where tpcomm's store listens. Under torchrun, MASTER_PORT is taken by torchrun's own store (its
// agent's with the default rendezvous, rank 0's once the program calls init_process_group), whose
// protocol differs between PyTorch versions; tpcomm keeps a port of its own beside it, the same on
// every rank without any exchange (docs/store.md, "Sharing a port with torchrun"). + 2, not + 1:
// with --standalone MASTER_PORT is a port the kernel handed to a bind (odd, on Linux), and the
// even port after it is where the kernel puts outgoing connections' local ports.
std::uint16_t master_store_port() {
  const auto master = env_integer("MASTER_PORT");
  if (!env_raw("TORCHELASTIC_RUN_ID")) return static_cast<std::uint16_t>(master);
  if (master >= 65534) {
    throw invalid_input(
        "under torchrun tpcomm's store takes MASTER_PORT + 2, and MASTER_PORT is above 65533: set "
        "TPCOMM_STORE_PORT");
  }
  return static_cast<std::uint16_t>(master + 2);
}

// Rank, size and store of this launch: torchrun / tpcomm run (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), mpirun with MASTER_ADDR / MASTER_PORT exported, or Slurm's srun.
struct Launch {
  std::int64_t rank = 0;
  std::int64_t size = 0;
  std::string addr;
  std::uint16_t port = 0;
  bool all_local = true;  // unknown counts as local: a loopback MASTER_ADDR says so anyway
};

// TPCOMM_STORE_PORT, when set, wins over the port a launcher implies.
std::uint16_t store_port_or(std::uint16_t implied) {
  return env_raw("TPCOMM_STORE_PORT") ? static_cast<std::uint16_t>(env_integer("TPCOMM_STORE_PORT"))
                                      : implied;
}

std::optional<Launch> launch_from_environment() {
  auto rank = first_of("RANK", "OMPI_COMM_WORLD_RANK");
  auto size = first_of("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  if (!rank || !size) {
    auto slurm = control::slurm_launch_from_environment();
    if (!slurm) return std::nullopt;
    return Launch{slurm->rank, slurm->size, slurm->first_host, store_port_or(slurm->port),
                  slurm->one_node};
  }
  auto addr = env_raw("MASTER_ADDR");
  auto port = env_raw("MASTER_PORT");
  if (!addr || !port) {
    throw invalid_input(fmt::format(
        "rank {} of {}: MASTER_ADDR and MASTER_PORT must name the rendezvous store (tpcomm run "
        "sets them; with mpirun export them, e.g. MASTER_ADDR=<host of rank 0> MASTER_PORT=29500)",
        *rank, *size));
  }
  auto local = first_of("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");
  // Only consulted without an override: MASTER_PORT may then be anything, even 65535.
  const std::uint16_t implied = env_raw("TPCOMM_STORE_PORT") ? 0 : master_store_port();
  return Launch{*rank, *size, *addr, store_port_or(implied), !local || *local >= *size};
}

// `why_not`: set to the reason when this rank could have served the store but could not bind.
std::unique_ptr<TcpStoreServer> host_store(const std::string& master_addr, std::uint16_t port,
                                           bool all_local, const std::optional<std::string>& secret,
                                           std::string& why_not) {
  auto bind = store_bind_address(master_addr, all_local);
  if (!bind) {
    TPCOMM_LOG(kDebug, "bootstrap", "not hosting the store: MASTER_ADDR {} is not this host",
               master_addr);
    return nullptr;
  }
  try {
    TcpStoreOptions options;
    options.secret = secret.value_or("");
    auto server = std::make_unique<TcpStoreServer>(*bind, port, options);
    if (!secret) {
      const std::string warning = fmt::format(
          "serving the group's store on {}:{} without a secret: any process that reaches it can "
          "join the group; set TPCOMM_STORE_SECRET for every rank (docs/store.md)",
          *bind, port);
      if (net::is_loopback(*bind)) {
        TPCOMM_LOG(kInfo, "bootstrap", "{}", warning);
      } else {
        TPCOMM_LOG(kWarn, "bootstrap", "{}", warning);
      }
    }
    return server;
  } catch (const Error& e) {
    // Somebody (tpcomm run, tpcomm store) already serves this port: use theirs.
    TPCOMM_LOG(kDebug, "bootstrap", "not hosting the store: {}", e.what());
    why_not = e.what();
    return nullptr;
  }
}

std::shared_ptr<Bootstrap> bootstrap_launched(const Deadline& deadline) {
  // mpirun without MASTER_ADDR / MASTER_PORT: the rendezvous goes over MPI itself.
  if (env_raw("OMPI_COMM_WORLD_RANK") && !env_raw("RANK") && !env_raw("MASTER_ADDR") &&
      !env_raw("MASTER_PORT")) {
    return make_mpi_bootstrap(deadline);
  }
  auto launch = launch_from_environment();
  if (!launch) {
    throw invalid_input(
        "not launched as a group: set RANK and WORLD_SIZE (tpcomm run, torchrun and mpirun do, "
        "srun sets SLURM_PROCID and SLURM_NTASKS; for example `tpcomm run -n 2 -- PROGRAM`)");
  }
  if (launch->rank < 0 || launch->rank >= launch->size) {
    throw invalid_input(
        fmt::format("rank {} is not below the world size {}", launch->rank, launch->size));
  }
  const auto secret = control::store_secret_from_environment();
  std::unique_ptr<TcpStoreServer> server;
  std::string why_not_hosted;
  if (launch->rank == 0) {
    server = host_store(launch->addr, launch->port, launch->all_local, secret, why_not_hosted);
  }
  std::shared_ptr<Store> store;
  try {
    store = connect_tcp_store(launch->addr, launch->port, deadline, secret.value_or(""));
  } catch (const Error& e) {
    // The port was taken, but not by a store: say so rather than only "cannot reach".
    if (why_not_hosted.empty()) throw;
    throw Error(e.code(), fmt::format("{}; rank 0 could not serve the store there itself: {} "
                                      "(another program holds the port: choose another "
                                      "MASTER_PORT or TPCOMM_STORE_PORT)",
                                      e.what(), why_not_hosted));
  }
  auto group = control::join_group(
      std::move(store), fmt::format("{}:{}", launch->addr, launch->port),
      control::group_id_from_environment(), static_cast<int>(launch->rank), deadline);
  return control::launched_bootstrap(std::move(group), static_cast<int>(launch->rank),
                                     static_cast<int>(launch->size), std::move(server));
}

}  // namespace

// Anything but a tpcomm::Error (std::thread's std::system_error, std::bad_alloc) leaves as one.
std::shared_ptr<Bootstrap> bootstrap_from_environment(const Deadline& deadline) {
  return common::only_tpcomm_errors("joining the group (bootstrap_from_environment)",
                                    [&] { return bootstrap_launched(deadline); });
}

}  // namespace tpcomm
