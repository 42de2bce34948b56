// Group identity on a shared store (group_scope.hpp).
#include "group_scope.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "common/bytes_text.hpp"
#include "store_auth.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::control {
namespace {

constexpr const char* kClaimKey = "tpcomm/claim";  // an anonymous group's token
constexpr const char* kBrokenKey = "broken";       // within the group: why it cannot form

class PrefixedStore final : public Store {
 public:
  PrefixedStore(std::shared_ptr<Store> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const Bytes& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::optional<Bytes> get(const std::string& key) override { return inner_->get(prefix_ + key); }
  std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                    const Deadline& deadline) override {
    return unprefixed(inner_->wait_for(full(keys), deadline));
  }
  std::vector<std::string> wait_briefly(const std::vector<std::string>& keys,
                                        std::chrono::milliseconds look,
                                        const Deadline& deadline) override {
    return unprefixed(inner_->wait_briefly(full(keys), look, deadline));
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                    const Bytes& desired) override {
    return inner_->compare_set(prefix_ + key, expected, desired);
  }
  bool remove(const std::string& key) override { return inner_->remove(prefix_ + key); }
  std::size_t size() override { return inner_->size(); }
  void set_request_timeout(std::chrono::milliseconds timeout) override {
    inner_->set_request_timeout(timeout);
  }
  void set_ephemeral(const std::string& key, const Bytes& value) override {
    inner_->set_ephemeral(prefix_ + key, value);
  }
  Bytes claim_ephemeral(const std::string& key, const Bytes& value) override {
    return inner_->claim_ephemeral(prefix_ + key, value);
  }

 private:
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::vector<std::string> unprefixed(std::vector<std::string> keys) const {
    for (auto& k : keys) k.erase(0, prefix_.size());
    return keys;
  }

  std::shared_ptr<Store> inner_;
  std::string prefix_;
};

using common::to_bytes;
using common::to_text;

// "host H, pid P": who a claim belongs to, for the error the other side gets.
std::string this_process() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("host {}, pid {}", host, getpid());
}

// An anonymous group's token: rank 0 claims the store with a new one, the others wait for it.
std::string anonymous_group_token(Store& store, const std::string& where, int rank,
                                  const Deadline& deadline) {
  if (rank != 0) {
    store.wait({kClaimKey}, deadline);
    auto claim = store.get(kClaimKey);
    if (!claim) throw Error(ErrorCode::kUnavailable, "the group's claim vanished from the store");
    std::string text = to_text(*claim);
    return text.substr(0, text.find(' '));
  }
  const std::string token = generate_store_secret().substr(0, 16);
  const std::string mine = fmt::format("{} rank 0 on {}", token, this_process());
  const std::string held = to_text(store.claim_ephemeral(kClaimKey, to_bytes(mine)));
  if (held == mine) return token;
  const std::string theirs = held.substr(0, held.find(' '));
  const std::string reason = fmt::format(
      "two groups met on the store at {}: a second group's rank 0 ({}) found it serving a group "
      "whose {} (two jobs with the same MASTER_ADDR:MASTER_PORT; give each its own MASTER_PORT, "
      "or set TPCOMM_GROUP_ID per job)",
      where, this_process(), held.substr(held.find(' ') + 1));
  store.set(fmt::format("tpcomm/g/{}/{}", theirs, kBrokenKey), to_bytes(reason));
  throw Error(ErrorCode::kMismatch, reason);
}

}  // namespace

std::optional<std::string> group_id_from_environment() {
  if (auto id = env_raw("TPCOMM_GROUP_ID")) return *id;
  if (auto run = env_raw("TORCHELASTIC_RUN_ID"); run && *run != "none") {
    return fmt::format("torchelastic-{}-{}", *run,
                       env_raw("TORCHELASTIC_RESTART_COUNT").value_or("0"));
  }
  if (auto ns = env_raw("PMIX_NAMESPACE")) return "pmix-" + *ns;
  if (auto job = env_raw("OMPI_MCA_ess_base_jobid")) return "ompi-" + *job;
  if (auto job = env_raw("SLURM_JOB_ID")) {
    return fmt::format("slurm-{}.{}", *job, env_raw("SLURM_STEP_ID").value_or("0"));
  }
  return std::nullopt;
}

std::shared_ptr<Store> make_prefixed_store(std::shared_ptr<Store> inner, std::string prefix) {
  return std::make_shared<PrefixedStore>(std::move(inner), std::move(prefix));
}

std::shared_ptr<Store> join_group(std::shared_ptr<Store> store, const std::string& where,
                                  const std::optional<std::string>& group_id, int rank,
                                  const Deadline& deadline) {
  const std::string id =
      group_id ? *group_id : anonymous_group_token(*store, where, rank, deadline);
  auto scoped = make_prefixed_store(std::move(store), fmt::format("tpcomm/g/{}/", id));
  // Unique even for two joins from one process (a thread per rank in tests).
  const std::string mine =
      fmt::format("{}, join {}", this_process(), generate_store_secret().substr(0, 8));
  const std::string held =
      to_text(scoped->claim_ephemeral(kSlotPrefix + std::to_string(rank), to_bytes(mine)));
  if (held != mine) {
    const std::string reason = fmt::format(
        "rank {} joined group {} twice: from {} and from {} (two processes started as rank {}, or "
        "two jobs share one store and one group id)",
        rank, id, held, mine, rank);
    scoped->set(kBrokenKey, to_bytes(reason));
    throw Error(ErrorCode::kMismatch, reason);
  }
  return scoped;
}

void check_group_intact(Store& group_store) {
  if (auto reason = group_store.get(kBrokenKey)) {
    throw Error(ErrorCode::kMismatch, to_text(*reason));
  }
}

}  // namespace tpcomm::control
