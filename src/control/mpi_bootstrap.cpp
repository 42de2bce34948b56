// Bootstrap over MPI (Open MPI, when present at build time): point-to-point messages polled
// against the deadline, so a rank that never arrives is named instead of hanging in a blocking
// collective. Backends' rendezvous (Gloo) still needs a store: rank 0 serves one and tells the
// others where, over MPI. MPI itself is reached through the plug-in libtpcomm_mpi.so, opened
// here on first use (mpi_plugin.hpp): libtpcomm does not link libmpi.
#include <unistd.h>

#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "common/rank_list.hpp"
#include "mpi_plugin.hpp"
#include "mpi_world.hpp"
#include "store_auth.hpp"
#include "store_keys.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

std::mutex failure_mutex;
std::optional<std::string> failure;  // mark_mpi_world_failed's first reason

std::optional<std::string> world_failure() {
  std::lock_guard<std::mutex> lock(failure_mutex);
  return failure;
}

class MpiBootstrap final : public Bootstrap {
 public:
  explicit MpiBootstrap(const Deadline& deadline) : mpi_(control::mpi_plugin()) {
    if (int rc = mpi_.open(&comm_, &rank_, &size_, &initialized_here_)) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("MPI could not be initialised (MPI error {})", rc));
    }
    try {
      set_up_store(deadline);
    } catch (...) {
      mpi_.close(comm_, initialized_here_);
      throw;
    }
  }

  ~MpiBootstrap() override {
    store_.reset();
    server_.reset();
    // MPI_Finalize waits for every rank of the job, without a deadline: the ranks meet first in
    // a round of this bootstrap (polled, under TPCOMM_TIMEOUT_MS), and finalise only if all came.
    if (initialized_here_ && !world_failure() && !broken_) {
      try {
        all_gather(Bytes{}, "MPI shutdown", Deadline::from_env());
      } catch (const std::exception&) {
        broken_ = true;  // all_gather has marked it already where it timed out
      }
    }
    if (auto why = world_failure(); why || broken_) {
      // A rank of the job may never reach MPI_Finalize (stopped, or waiting for us): this
      // process ends without it, and mpirun ends the job.
      TPCOMM_LOG(kWarn, "bootstrap",
                 "rank {}: MPI is not finalised ({}): mpirun will end the job when this process "
                 "exits",
                 rank_, why ? *why : "the MPI bootstrap timed out");
      return;
    }
    mpi_.close(comm_, initialized_here_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const TpcommMpiApi& api() const { return mpi_; }
  void* comm() const { return comm_; }
  std::shared_ptr<Store> store() const override { return store_; }

  std::vector<Bytes> all_gather(const Bytes& mine, std::string_view what,
                                const Deadline& deadline) override {
    if (broken_)
      throw Error(ErrorCode::kAborted, "the MPI bootstrap timed out earlier and cannot be reused");
    const long round = round_++;
    const int tag = static_cast<int>(round % 32000) + 1;
    std::vector<Bytes> out(static_cast<std::size_t>(size_));
    out[static_cast<std::size_t>(rank_)] = mine;
    std::vector<void*> sends;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sends.emplace_back(nullptr);
      check(mpi_.isend(comm_, mine.data(), static_cast<int>(mine.size()), r, tag, &sends.back()),
            "send");
    }
    std::vector<bool> have(static_cast<std::size_t>(size_), false);
    have[static_cast<std::size_t>(rank_)] = true;
    int pending = size_ - 1;
    while (pending > 0) {
      bool progress = false;
      for (int r = 0; r < size_; ++r) {
        if (have[static_cast<std::size_t>(r)]) continue;
        int waiting = 0;
        int count = 0;
        check(mpi_.iprobe(comm_, r, tag, &waiting, &count), "probe");
        if (!waiting) continue;
        out[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(count));
        check(mpi_.recv(comm_, out[static_cast<std::size_t>(r)].data(), count, r, tag), "receive");
        have[static_cast<std::size_t>(r)] = true;
        --pending;
        progress = true;
      }
      if (pending == 0) break;
      if (deadline.expired()) {
        std::vector<int> missing;
        for (int r = 0; r < size_; ++r) {
          if (!have[static_cast<std::size_t>(r)]) missing.push_back(r);
        }
        broken_ = true;
        throw Error(
            ErrorCode::kTimeout,
            fmt::format("{} did not {} within {} ms ({}, over MPI)", common::rank_set_text(missing),
                        round == 0 ? "join" : "arrive", deadline.budget().count(), what));
      }
      if (!progress) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // Every peer sent to us, so every peer is here and will take our message.
    for (auto& req : sends) {
      int done = 0;
      while (!done) {
        check(mpi_.test(req, &done), "send");
        if (!done) {
          if (deadline.expired()) {
            broken_ = true;
            throw Error(
                ErrorCode::kTimeout,
                fmt::format("a peer did not take this rank's message within {} ms ({}, over MPI)",
                            deadline.budget().count(), what));
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    }
    return out;
  }

 private:
  // Rank 0 serves a store; everyone learns its address and a fresh secret from rank 0 over MPI
  // (MPI is the trusted channel). One group per store: its port is new, so no group scope.
  void set_up_store(const Deadline& deadline) {
    std::string where;
    if (rank_ == 0) {
      const bool all_local = env_raw("OMPI_COMM_WORLD_LOCAL_SIZE") &&
                             env_integer("OMPI_COMM_WORLD_LOCAL_SIZE") == size_;
      std::string host = "127.0.0.1";
      if (auto a = env_raw("TPCOMM_SOCKET_ADDRESS")) {
        host = *a;
      } else if (!all_local) {
        char name[256] = {};
        gethostname(name, sizeof(name) - 1);
        host = name;
      }
      TcpStoreOptions options;
      options.secret = control::generate_store_secret();
      server_ = std::make_unique<TcpStoreServer>(all_local ? "127.0.0.1" : "0.0.0.0", 0, options);
      where = fmt::format("{} {}:{}", options.secret, host, server_->port());
    }
    Bytes shared = broadcast(Bytes(where.begin(), where.end()), 0, "store address", deadline);
    where.assign(shared.begin(), shared.end());
    const auto space = where.find(' ');
    const auto colon = where.rfind(':');
    store_ = connect_tcp_store(where.substr(space + 1, colon - space - 1),
                               static_cast<std::uint16_t>(std::stoi(where.substr(colon + 1))),
                               deadline, where.substr(0, space));
    // Who serves it, as a launched group's store says (launched_bootstrap.hpp): a rank whose
    // call failed can then tell its host's end from its own network's.
    if (rank_ == 0) store_->set(control::kStoreServedByKey, Bytes{'0'});
  }

  // An MPI call that failed (Open MPI aborts the job on errors by default: this is for the ones
  // it returns).
  void check(int rc, const char* what) {
    if (rc == 0) return;
    broken_ = true;
    throw Error(ErrorCode::kUnavailable, fmt::format("MPI {} failed (MPI error {})", what, rc));
  }

  const TpcommMpiApi& mpi_;
  void* comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int initialized_here_ = 0;
  bool broken_ = false;
  long round_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
};

}  // namespace

std::shared_ptr<Bootstrap> make_mpi_bootstrap(const Deadline& deadline) {
  return std::make_shared<MpiBootstrap>(deadline);
}

namespace control {

void mark_mpi_world_failed(const std::string& why) {
  std::lock_guard<std::mutex> lock(failure_mutex);
  if (!failure) failure = why;
}

std::optional<MpiWorld> mpi_world_of(const Bootstrap& bootstrap, std::string* why) {
  const auto* mpi = dynamic_cast<const MpiBootstrap*>(&bootstrap);
  if (mpi == nullptr) {
    if (why) *why = "not bootstrapped through MPI (mpirun without MASTER_ADDR / MASTER_PORT)";
    return std::nullopt;
  }
  char library[256] = {};
  int serialized = 0;
  if (int rc = mpi->api().describe(library, sizeof(library), &serialized)) {
    if (why) *why = fmt::format("MPI could not describe itself (MPI error {})", rc);
    return std::nullopt;
  }
  if (!serialized) {
    if (why) {
      *why =
          "the program initialised MPI below MPI_THREAD_SERIALIZED: tpcomm's calls may come "
          "from another thread than the one that initialised it";
    }
    return std::nullopt;
  }
  return MpiWorld{&mpi->api(), mpi->comm(), mpi->rank(), mpi->size(), library};
}

}  // namespace control

}  // namespace tpcomm
