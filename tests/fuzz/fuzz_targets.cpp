// Fuzz targets (docs/testing.md, "Fuzzing"): the facts codec with the planner behind it, the
// tuning codec, and the TCP store server's protocol. Each takes arbitrary bytes; the input may be
// rejected with a tpcomm::Error, and anything else — a crash, a sanitizer report, another
// exception, an "internal error" — is a bug, reported by aborting.
#include "fuzz_targets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>

#include "control/store_auth.hpp"
#include "control/store_protocol.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/facts_json.hpp"
#include "tpcomm/plan.hpp"
#include "tpcomm/tcp_store.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm::fuzz {
namespace {

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "fuzz: BUG: %s\n", what.c_str());
  std::abort();
}

// Runs `f`; an Error other than kInternal is a rejected input, anything else a bug.
template <typename F>
void expect_only_input_errors(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInternal) bug(std::string("internal error: ") + e.what());
  } catch (const std::exception& e) {
    bug(std::string("an exception that is not a tpcomm::Error: ") + e.what());
  }
}

void facts(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  expect_only_input_errors([&] {
    FactsTable table = decode_facts(text);
    (void)make_plan(table, PlanOptions{});
  });
}

void tuning(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  expect_only_input_errors([&] { (void)decode_tuning(text, "fuzz input"); });
}

// One server for the whole run; every input is a new connection that completes the handshake
// (the server has no secret) and then sends the input as requests. The server must answer or
// drop the connection, never crash, and must still serve a well-behaved client afterwards.
// Started on first use, stopped by stop_targets(): a server thread still running when the
// process exits would outlive OpenSSL's own clean-up (its per-thread state then leaks).
std::unique_ptr<TcpStoreServer>& store_server() {
  static std::unique_ptr<TcpStoreServer> server;
  return server;
}

void store_protocol(const std::uint8_t* data, std::size_t size) {
  if (!store_server()) store_server() = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  TcpStoreServer& server = *store_server();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) bug("cannot reach the store");
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  Bytes hello = store_wire::Writer(store_wire::Type::kHello).bytes(control::random_nonce()).frame();
  Bytes proof = store_wire::Writer(store_wire::Type::kProof).bytes(Bytes{}).frame();
  // The handshake's replies are read with the rest; the input follows the proof at once.
  Bytes stream = hello;
  stream.insert(stream.end(), proof.begin(), proof.end());
  stream.insert(stream.end(), data, data + size);
  if (send(fd, stream.data(), stream.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return;  // the server dropped us already: fine
  }
  shutdown(fd, SHUT_WR);
  std::uint8_t sink[65536];
  while (recv(fd, sink, sizeof(sink), 0) > 0) {
  }
  close(fd);
  // Still serving: a store that broke on the input would fail here.
  auto client =
      connect_tcp_store("127.0.0.1", server.port(), Deadline::after(std::chrono::seconds(10)));
  client->set("fuzz/alive", Bytes{1});
  if (client->get("fuzz/alive") != Bytes{1}) bug("the store lost a key after a fuzz input");
  client->remove("fuzz/alive");
}

}  // namespace

void stop_targets() {
  store_server().reset();
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"facts", facts},
      {"tuning", tuning},
      {"store", store_protocol},
  };
  return all;
}

}  // namespace tpcomm::fuzz
