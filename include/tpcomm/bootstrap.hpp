// Bootstrap: how the ranks of a group first find each other and exchange small messages before
// any backend exists. Every operation takes a deadline; a rank that does not arrive in time is
// named in the error ("ranks 3, 5 did not join within 60000 ms").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tpcomm/deadline.hpp"
#include "tpcomm/store.hpp"

namespace tpcomm {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank's bytes, in rank order. `what` names the step in errors.
  virtual std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                        const Deadline& deadline) = 0;
  // A store shared by the group, for backends' own rendezvous (Gloo's).
  virtual std::shared_ptr<Store> store() const = 0;

  // The root's bytes on every rank.
  Bytes broadcast(const Bytes& data, int root, std::string_view what, const Deadline& deadline);
  void barrier(std::string_view what, const Deadline& deadline);
};

// Over a key-value store. Keys live under `prefix`; the last rank to read a round deletes it, so
// neither a long-lived group nor many short-lived ones grow the store. With a
// `presence_prefix`, every rank holds the ephemeral key <presence_prefix><rank> while its process
// lives (bootstrap_from_environment's slots), and a rank whose key has gone after the first round
// is reported dead at once instead of at the deadline.
std::shared_ptr<Bootstrap> make_store_bootstrap(std::shared_ptr<Store> store, int rank, int size,
                                                std::string prefix = "tpcomm",
                                                std::string presence_prefix = "");

// For threads of one process (tests): make_thread_group(n)[r] is rank r's bootstrap.
std::vector<std::shared_ptr<Bootstrap>> make_thread_group(int size);

// Over MPI (Open MPI at build time): for processes started by mpirun. Initialises MPI when the
// program has not; a store for backends' rendezvous is served by rank 0. Throws kUnavailable in a
// build without MPI.
std::shared_ptr<Bootstrap> make_mpi_bootstrap(const Deadline& deadline);

// From the launch environment (tpcomm run, torchrun: RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK / _SIZE for rank and size; Slurm's srun). Rank 0
// serves the store on MASTER_PORT (MASTER_PORT + 2 under torchrun, whose own store holds
// MASTER_PORT; TPCOMM_STORE_PORT overrides both) unless one already listens there (tpcomm run,
// tpcomm store). Under mpirun without MASTER_ADDR, the MPI bootstrap.
std::shared_ptr<Bootstrap> bootstrap_from_environment(const Deadline& deadline);

// For a program whose ranks can already share a few bytes (torch.distributed's store, an engine's
// own control plane): rank 0 creates a StoreHost, which serves tpcomm's store on a port the kernel
// picks (so it collides with nothing) under a fresh secret and group id, and shares its address();
// every rank then calls bootstrap_from_address with that text, rank 0 handing its host over.
class StoreHost {
 public:
  // `host`: this machine's name or address as the other ranks reach it (a loopback address when
  // all ranks run here). Throws kUnavailable when it cannot be served.
  explicit StoreHost(const std::string& host);
  ~StoreHost();
  StoreHost(const StoreHost&) = delete;
  StoreHost& operator=(const StoreHost&) = delete;
  // "tpcomm-store <host> <port> <group id> <secret>": it holds the secret, so share it only with
  // the group's ranks (over a channel they already trust).
  const std::string& address() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend std::shared_ptr<Bootstrap> bootstrap_from_address(const std::string&, int, int,
                                                           const Deadline&,
                                                           std::unique_ptr<StoreHost>);
};

// Joins the group whose store `address` (StoreHost::address) names, as `rank` of `size`. Rank 0
// passes its StoreHost, which then lives as long as the bootstrap. Throws kInvalidInput for text
// that is not such an address, and as bootstrap_from_environment does otherwise.
std::shared_ptr<Bootstrap> bootstrap_from_address(const std::string& address, int rank, int size,
                                                  const Deadline& deadline,
                                                  std::unique_ptr<StoreHost> host = nullptr);

}  // namespace tpcomm
