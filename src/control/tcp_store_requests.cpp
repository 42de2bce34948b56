// The TCP store server's handshake and request handlers. A malformed frame throws (the event
// loop drops the client); a request the store refuses (a value above the limit, a full store,
// ADD on a non-integer) is answered with ERROR and the connection stays.
#include <fmt/format.h>

#include "common/log_format.hpp"
#include "store_auth.hpp"
#include "tcp_store_server_impl.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {

using store_wire::Type;
using Impl = TcpStoreServer::Impl;

void Impl::reply(Client& c, const store_wire::Writer& w) {
  Bytes f = w.frame();
  if (c.out.empty()) c.out_since = Clock::now();
  c.out.insert(c.out.end(), f.begin(), f.end());
}

void Impl::refuse(Client& c, const std::string& message) {
  reply(c, store_wire::Writer(Type::kError).string(message));
}

void Impl::refuse_and_close(Client& c, const std::string& message) {
  TPCOMM_LOG(kWarn, "store", "client {} refused: {}", c.peer, message);
  refuse(c, message);
  c.closing = true;  // the loop sends the error, then closes
}

void Impl::handle_frame(Client& c, Type type, const std::uint8_t* payload, std::size_t size) {
  store_wire::Reader r(payload, size);
  switch (c.stage) {
    case Stage::kHello:
      if (type != Type::kHello) break;
      return handle_hello(c, r);
    case Stage::kProof:
      if (type != Type::kProof) break;
      return handle_proof(c, r);
    case Stage::kReady:
      return handle_request(c, type, r);
  }
  refuse_and_close(c, fmt::format("request type {} before the handshake: this store speaks "
                                  "tpcomm store protocol {} (docs/store.md)",
                                  static_cast<int>(type), store_wire::kVersion));
}

void Impl::handle_hello(Client& c, store_wire::Reader& r) {
  c.client_nonce = r.bytes();
  r.expect_end();
  if (c.client_nonce.size() != control::kNonceBytes) {
    throw invalid_input(fmt::format("hello with a nonce of {} bytes", c.client_nonce.size()));
  }
  c.server_nonce = control::random_nonce();
  c.stage = Stage::kProof;
  reply(c, store_wire::Writer(Type::kChallenge)
               .bytes(c.server_nonce)
               .u8(options.secret.empty() ? 0 : 1));
}

void Impl::handle_proof(Client& c, store_wire::Reader& r) {
  Bytes proof = r.bytes();
  r.expect_end();
  if (!options.secret.empty()) {
    if (proof.empty()) {
      return refuse_and_close(c,
                              "this store requires the group's secret and the client sent "
                              "none (set TPCOMM_STORE_SECRET or TPCOMM_STORE_SECRET_FILE)");
    }
    if (!control::same_proof(
            proof, control::client_proof(options.secret, c.server_nonce, c.client_nonce))) {
      return refuse_and_close(c,
                              "authentication failed: the client's secret is not this "
                              "store's (another group's store, or TPCOMM_STORE_SECRET differs)");
    }
  }
  c.stage = Stage::kReady;
  reply(c, store_wire::Writer(Type::kWelcome)
               .bytes(options.secret.empty()
                          ? Bytes{}
                          : control::server_proof(options.secret, c.server_nonce, c.client_nonce)));
}

void Impl::handle_request(Client& c, Type type, store_wire::Reader& r) {
  std::lock_guard<std::mutex> lock(mutex);
  switch (type) {
    case Type::kSet:
      return handle_set(c, r, false);
    case Type::kSetEphemeral:
      return handle_set(c, r, true);
    case Type::kClaimEphemeral:
      return handle_claim(c, r);
    case Type::kGet:
      return handle_get(c, r);
    case Type::kWait:
      return handle_wait(c, r);
    case Type::kAdd:
      return handle_add(c, r);
    case Type::kCompareSet:
      return handle_compare_set(c, r);
    case Type::kDelete:
      return handle_delete(c, r);
    case Type::kSize:
      return handle_size(c, r);
    default:
      throw invalid_input(fmt::format("unknown request type {}", static_cast<int>(type)));
  }
}

void Impl::handle_set(Client& c, store_wire::Reader& r, bool ephemeral) {
  std::string key = r.string();
  Bytes value = r.bytes();
  r.expect_end();
  answer(c, [&] {
    data.set(key, std::move(value));
    if (ephemeral) c.ephemeral.push_back(key);
    reply(c, store_wire::Writer(Type::kOk));
  });
}

void Impl::handle_claim(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  Bytes value = r.bytes();
  r.expect_end();
  answer(c, [&] {
    const bool absent = data.get(key) == nullptr;
    Bytes held = data.compare_set(key, std::nullopt, value);
    if (absent) c.ephemeral.push_back(key);
    reply(c, store_wire::Writer(Type::kValue).bytes(held));
  });
}

void Impl::handle_get(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  r.expect_end();
  if (const Bytes* value = data.get(key)) {
    reply(c, store_wire::Writer(Type::kValue).bytes(*value));
  } else {
    reply(c, store_wire::Writer(Type::kNotFound));
  }
}

// Answered now when every key is present, else parked until they are or its deadline passes.
void Impl::handle_wait(Client& c, store_wire::Reader& r) {
  auto timeout_ms = r.i64();
  auto count = r.i64();
  if (count < 0 || count > 1'000'000) throw invalid_input("wait for an absurd number of keys");
  if (timeout_ms < 0 || timeout_ms > 86'400'000) throw invalid_input("wait for an absurd time");
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < count; ++i) keys.push_back(r.string());
  r.expect_end();
  if (data.missing(keys).empty()) {
    reply(c, store_wire::Writer(Type::kOk));
  } else {
    waiters.push_back(
        {c.fd.get(), std::move(keys), Clock::now() + std::chrono::milliseconds(timeout_ms)});
  }
}

void Impl::handle_add(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  auto delta = r.i64();
  r.expect_end();
  answer(c, [&] { reply(c, store_wire::Writer(Type::kInteger).i64(data.add(key, delta))); });
}

void Impl::handle_compare_set(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  bool has_expected = r.u8() != 0;
  Bytes expected = r.bytes();
  Bytes desired = r.bytes();
  r.expect_end();
  answer(c, [&] {
    Bytes held = data.compare_set(
        key, has_expected ? std::optional<Bytes>(std::move(expected)) : std::nullopt,
        std::move(desired));
    reply(c, store_wire::Writer(Type::kValue).bytes(held));
  });
}

void Impl::handle_delete(Client& c, store_wire::Reader& r) {
  std::string key = r.string();
  r.expect_end();
  std::erase(c.ephemeral, key);
  reply(c, store_wire::Writer(Type::kBool).u8(data.remove(key) ? 1 : 0));
}

void Impl::handle_size(Client& c, store_wire::Reader& r) {
  r.expect_end();
  reply(c, store_wire::Writer(Type::kInteger).i64(static_cast<std::int64_t>(data.size())));
}

}  // namespace tpcomm
