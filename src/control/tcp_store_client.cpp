// The TCP store client: one connection, one request at a time, every reply awaited with a
// deadline. A lost connection is an error naming the store's address. Threads share a client
// (the world communicator, its splits, hier's node bootstraps): a request waits for the
// connection at most until its deadline and, having sent nothing, leaves it usable; a wait is
// asked of the server in short slices, so that it never holds the connection for long.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "common/fair_timed_mutex.hpp"
#include "common/foreign_error.hpp"
#include "common/fork_generation.hpp"
#include "socket_util.hpp"
#include "store_auth.hpp"
#include "store_protocol.hpp"
#include "store_request_deadline.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using store_wire::Type;

// How long one wait request may hold the connection at the server: other threads' requests
// (a set another barrier waits for) go in between.
constexpr std::chrono::milliseconds kWaitSlice{200};
// Slack past a wait's deadline for the server's last answer to arrive: a wait on a store that no
// longer answers (a partition) ends this long after its deadline.
constexpr std::chrono::milliseconds kReplySlack{500};
// A store answers the handshake at once; something that does not is not a tpcomm store.
constexpr std::chrono::milliseconds kHandshakeBudget{10'000};
// How long a dial that tells a store that went away from another program may take.
constexpr std::chrono::milliseconds kListenProbe{500};

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(net::Fd fd, std::string host, std::uint16_t port,
                 std::chrono::milliseconds request_timeout)
      : fd_(std::move(fd)),
        host_(std::move(host)),
        port_(port),
        address_(fmt::format("{}:{}", host_, port_)),
        request_timeout_ms_(request_timeout.count()),
        fork_generation_(common::process_fork_generation()) {}
  // In a fork() child, only the child's copy of the descriptor closes: no shutdown(), no
  // goodbye on the parent's connection.
  ~TcpStoreClient() override = default;

  void set(const std::string& key, const Bytes& value) override {
    expect(call(store_wire::Writer(Type::kSet).string(key).bytes(value)), Type::kOk, "set");
  }
  void set_ephemeral(const std::string& key, const Bytes& value) override {
    expect(call(store_wire::Writer(Type::kSetEphemeral).string(key).bytes(value)), Type::kOk,
           "set");
  }
  Bytes claim_ephemeral(const std::string& key, const Bytes& value) override {
    Reply r = call(store_wire::Writer(Type::kClaimEphemeral).string(key).bytes(value));
    expect(r, Type::kValue, "claim");
    return store_wire::Reader(r.payload.data(), r.payload.size()).bytes();
  }
  std::optional<Bytes> get(const std::string& key) override {
    Reply r = call(store_wire::Writer(Type::kGet).string(key));
    if (r.type == Type::kNotFound) return std::nullopt;
    expect(r, Type::kValue, "get");
    return store_wire::Reader(r.payload.data(), r.payload.size()).bytes();
  }
  // In slices of at most kWaitSlice, releasing the connection between them; each slice asks
  // only for the keys still missing (a key seen once counts, as a single wait would).
  std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                    const Deadline& deadline) override {
    return wait_briefly(keys, deadline.remaining(), deadline);
  }
  // Every slice's answer is awaited until the caller's deadline (and the slack), not the look's.
  std::vector<std::string> wait_briefly(const std::vector<std::string>& keys,
                                        std::chrono::milliseconds look,
                                        const Deadline& deadline) override {
    const Deadline bound = control::within_store_scope(deadline);
    const Deadline looked = Deadline::after(std::min(look, bound.remaining()));
    std::vector<std::string> missing = keys;
    do {
      missing = wait_slice(missing, std::min(looked.remaining(), kWaitSlice), deadline);
    } while (!missing.empty() && !looked.expired());
    return missing;
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    Reply r = call(store_wire::Writer(Type::kAdd).string(key).i64(delta));
    expect(r, Type::kInteger, "add");
    return store_wire::Reader(r.payload.data(), r.payload.size()).i64();
  }
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                    const Bytes& desired) override {
    store_wire::Writer w(Type::kCompareSet);
    w.string(key).u8(expected ? 1 : 0).bytes(expected.value_or(Bytes{})).bytes(desired);
    Reply r = call(w);
    expect(r, Type::kValue, "compare_set");
    return store_wire::Reader(r.payload.data(), r.payload.size()).bytes();
  }
  bool remove(const std::string& key) override {
    Reply r = call(store_wire::Writer(Type::kDelete).string(key));
    expect(r, Type::kBool, "delete");
    return store_wire::Reader(r.payload.data(), r.payload.size()).u8() != 0;
  }
  // Both ends prove the secret (docs/store.md, "Authentication"); throws kInvalidInput when they
  // disagree, and kUnavailable when the other end does not speak the protocol.
  void handshake(const std::string& secret, const Deadline& deadline) {
    handshaking_ = true;
    const Bytes client_nonce = control::random_nonce();
    Reply challenge = call(store_wire::Writer(Type::kHello).bytes(client_nonce), deadline);
    expect(challenge, Type::kChallenge, "handshake");
    store_wire::Reader r(challenge.payload.data(), challenge.payload.size());
    const Bytes server_nonce = r.bytes();
    const bool required = r.u8() != 0;
    if (required && secret.empty()) {
      refuse(
          fmt::format("the store at {} requires the group's secret and this rank has none (set "
                      "TPCOMM_STORE_SECRET or TPCOMM_STORE_SECRET_FILE as for the store)",
                      address_));
    }
    if (!required && !secret.empty()) {
      refuse(
          fmt::format("the store at {} does not know this group's secret: it belongs to another "
                      "group or was started without TPCOMM_STORE_SECRET",
                      address_));
    }
    Bytes proof =
        secret.empty() ? Bytes{} : control::client_proof(secret, server_nonce, client_nonce);
    Reply welcome = call(store_wire::Writer(Type::kProof).bytes(proof), deadline);
    expect(welcome, Type::kWelcome, "handshake");
    Bytes theirs = store_wire::Reader(welcome.payload.data(), welcome.payload.size()).bytes();
    if (!secret.empty() &&
        !control::same_proof(theirs, control::server_proof(secret, server_nonce, client_nonce))) {
      refuse(
          fmt::format("the store at {} did not prove this group's secret: it is not this "
                      "group's store",
                      address_));
    }
    handshaking_ = false;
  }

  void set_request_timeout(std::chrono::milliseconds timeout) override {
    request_timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
  }

  std::size_t size() override {
    Reply r = call(store_wire::Writer(Type::kSize));
    expect(r, Type::kInteger, "size");
    return static_cast<std::size_t>(store_wire::Reader(r.payload.data(), r.payload.size()).i64());
  }

 private:
  struct Reply {
    Type type;
    Bytes payload;
  };

  // A request without a deadline of its own waits at most the request timeout; any request at
  // most until the thread's store deadline scope ends (store_request_deadline.hpp).
  Reply call(const store_wire::Writer& request) {
    return call(request, Deadline::after(std::chrono::milliseconds(
                             request_timeout_ms_.load(std::memory_order_relaxed))));
  }
  // Waits for the connection until the deadline; nothing sent yet, a timeout leaves it usable.
  // The reply is awaited `slack` past the deadline (never past the scope's). Only a request
  // whose I/O started and failed breaks the connection: its stream is out of step for good.
  Reply call(const store_wire::Writer& request, const Deadline& own,
             std::chrono::milliseconds slack = {}) {
    refuse_in_fork_child();
    const Deadline bound = control::within_store_scope(own);
    const Deadline io = control::within_store_scope(Deadline::after(own.remaining() + slack));
    std::unique_lock<FairTimedMutex> lock(mutex_, std::defer_lock);
    if (!lock.try_lock_until(io.at()) || io.expired()) throw no_turn(bound);
    if (broken_) throw Error(broken_code_, broken_message_);
    Bytes frame = request.frame();
    std::string why;
    std::uint8_t header[store_wire::kHeaderSize];
    Reply reply{Type::kError, {}};
    if (!net::send_all(fd_.get(), frame.data(), frame.size(), io, &why) ||
        !net::recv_all(fd_.get(), header, sizeof(header), io, &why)) {
      fail(why, io, bound.budget());
    }
    store_wire::Header h = store_wire::decode_header(header);
    if (std::string problem = store_wire::check_header(h); !problem.empty()) {
      fail(problem, std::nullopt, bound.budget());
    }
    answered_ = true;  // a tpcomm store's frame: whatever happens next, it was one
    reply.type = h.type;
    reply.payload.resize(h.length);
    if (!net::recv_all(fd_.get(), reply.payload.data(), h.length, io, &why)) {
      fail(why, io, bound.budget());
    }
    return reply;
  }

  std::vector<std::string> wait_slice(const std::vector<std::string>& keys,
                                      std::chrono::milliseconds slice, const Deadline& deadline) {
    store_wire::Writer w(Type::kWait);
    w.i64(slice.count()).i64(static_cast<std::int64_t>(keys.size()));
    for (const auto& k : keys) w.string(k);
    // A wait for many keys (a group of 100000 ranks) sends and gets back megabytes: its answer
    // may take longer than a few keys' to travel (about 10 us a key under the sanitizers, and
    // 2-3 times that on a loaded 2-core machine: 50 us a key are allowed).
    const auto slack = kReplySlack + std::chrono::milliseconds(keys.size() / 20);
    Reply r = call(w, deadline, slack);
    if (r.type == Type::kOk) return {};
    expect(r, Type::kMissing, "wait");
    store_wire::Reader reader(r.payload.data(), r.payload.size());
    std::vector<std::string> missing;
    for (auto n = reader.i64(); n > 0; --n) missing.push_back(reader.string());
    return missing;
  }

  // The connection is the parent's: a request from a fork() child would interleave with the
  // parent's on one stream and corrupt both.
  void refuse_in_fork_child() const {
    if (common::process_fork_generation() == fork_generation_) return;
    throw Error(ErrorCode::kInvalidInput,
                fmt::format("this process is a fork() child: the connection to the store at {} "
                            "belongs to its parent, and the child may not use it (create a new "
                            "connection, or a new communicator, in the child)",
                            address_));
  }

  // The deadline passed while other threads of this process had the connection (a request of
  // theirs to a store that is slow or no longer answers); nothing was sent.
  Error no_turn(const Deadline& bound) const {
    return Error(ErrorCode::kTimeout,
                 fmt::format("the store at {} did not take this request within {} ms: other "
                             "threads' requests held this process's connection to it (a store "
                             "that answers slowly or not at all)",
                             address_, bound.budget().count()));
  }

  [[noreturn]] void refuse(const std::string& why) {
    broken_ = true;
    broken_code_ = ErrorCode::kInvalidInput;
    broken_message_ = why;
    throw Error(ErrorCode::kInvalidInput, why);
  }

  [[noreturn]] void fail(const std::string& why, const std::optional<Deadline>& deadline,
                         std::chrono::milliseconds budget) {
    broken_ = true;
    std::tie(broken_code_, broken_message_) = failure(why, deadline, budget);
    throw Error(broken_code_, broken_message_);
  }

  // What a lost connection is. A server that accepted the connection but never sent a tpcomm
  // frame, and still listens (whether it closed the connection or stayed silent), is another
  // program on that port (torchrun's c10d store, a web server): say so, not "unreachable". One that
  // sent a frame, or no longer listens, was the store and went away (its process ended). No answer
  // within the deadline: unreachable within it (the network is cut, or the store's host stopped).
  // `budget`: the request's own, which the report names (the I/O deadline may add slack).
  std::pair<ErrorCode, std::string> failure(const std::string& why,
                                            const std::optional<Deadline>& deadline,
                                            std::chrono::milliseconds budget) {
    const bool timed_out = deadline && deadline->expired();
    // A server that stays silent but still accepts connections is another program too: torch
    // 2.x's c10d store waits for a request of its own protocol instead of closing.
    if (handshaking_ && !answered_ && (!deadline || still_listens())) {
      const std::string what =
          timed_out ? fmt::format(
                          "it accepted the connection but did not answer the handshake "
                          "within {} ms",
                          budget.count())
                    : why;
      return {ErrorCode::kInvalidInput,
              fmt::format("the server at {} is not a tpcomm store (protocol {}): {}; another "
                          "program listens on that port (torchrun's own store listens on "
                          "MASTER_PORT: see docs/store.md, \"Sharing a port with torchrun\")",
                          address_, store_wire::kVersion, what)};
    }
    if (timed_out) {
      return {ErrorCode::kTimeout,
              fmt::format("the store at {} is unreachable within {} ms: no answer (the network to "
                          "it is cut, or its host stopped)",
                          address_, budget.count())};
    }
    if (handshaking_) {
      return {ErrorCode::kUnavailable,
              fmt::format("the store at {} went away during the handshake ({}): the process "
                          "serving it ended",
                          address_, why)};
    }
    return {ErrorCode::kUnavailable,
            fmt::format("the store at {} is unreachable: {}", address_, why)};
  }

  // Whether something still accepts connections on the store's port (a moment's dial).
  bool still_listens() const {
    std::string ignored;
    return net::connect_tcp(host_, port_, Deadline::after(kListenProbe), &ignored).get() >= 0;
  }

  void expect(const Reply& r, Type type, const char* what) {
    if (r.type == type) return;
    if (r.type == Type::kError) {
      throw Error(ErrorCode::kInvalidInput,
                  fmt::format("the store at {} refused the {}: {}", address_, what,
                              store_wire::Reader(r.payload.data(), r.payload.size()).string()));
    }
    throw Error(ErrorCode::kInternal,
                fmt::format("store {}: unexpected reply type {}", what, static_cast<int>(r.type)));
  }

  FairTimedMutex mutex_;  // the connection: one request at a time, in arrival order
  net::Fd fd_;
  std::string host_;
  std::uint16_t port_;
  std::string address_;
  std::atomic<std::int64_t> request_timeout_ms_;
  const std::uint64_t fork_generation_;  // the process's when the connection was made
  bool broken_ = false;
  bool handshaking_ = false;
  bool answered_ = false;  // a tpcomm frame arrived on this connection
  ErrorCode broken_code_ = ErrorCode::kUnavailable;
  std::string broken_message_;
};

// Dials until the deadline (the server may start after the client), then the handshake.
std::shared_ptr<Store> dial_store(const std::string& host, std::uint16_t port,
                                  const Deadline& deadline, const std::string& secret) {
  std::string why;
  while (true) {
    net::Fd fd = net::connect_tcp(host, port, deadline, &why);
    if (fd.get() >= 0) {
      // Each later request waits at most the budget this connection was given.
      auto client = std::make_shared<TcpStoreClient>(std::move(fd), host, port, deadline.budget());
      client->handshake(secret, Deadline::after(std::min(deadline.remaining(), kHandshakeBudget)));
      return client;
    }
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  fmt::format("cannot reach the store at {}:{} within {} ms: {} (is MASTER_ADDR / "
                              "MASTER_PORT right, and is the store running?)",
                              host, port, deadline.budget().count(), why));
    }
    std::this_thread::sleep_for(std::min(std::chrono::milliseconds(20), deadline.remaining()));
  }
}

}  // namespace

// Anything but a tpcomm::Error (std::bad_alloc) leaves as one.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, std::uint16_t port,
                                         const Deadline& deadline, const std::string& secret) {
  return common::only_tpcomm_errors(fmt::format("connecting to the store at {}:{}", host, port),
                                    [&] { return dial_store(host, port, deadline, secret); });
}

}  // namespace tpcomm
