// The store under attack and misuse (docs/store.md, "Threat model"): the handshake that proves the
// group's secret, the limits that keep one client from exhausting the store, and the group scope
// that keeps two groups on one store apart.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "control/group_scope.hpp"
#include "control/slurm_environment.hpp"
#include "control/store_auth.hpp"
#include "control/store_protocol.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;
using store_wire::Type;

Bytes b(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

TcpStoreOptions with_secret(const std::string& secret) {
  TcpStoreOptions o;
  o.secret = secret;
  return o;
}

// The message of the Error that `f` throws, with its code checked.
template <typename F>
std::string error_of(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

// A client that speaks the wire protocol by hand, to do what tpcomm's client never does.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { close(fd_); }
  void send_frame(const store_wire::Writer& w) {
    Bytes f = w.frame();
    ASSERT_EQ(::send(fd_, f.data(), f.size(), MSG_NOSIGNAL), static_cast<ssize_t>(f.size()));
  }
  // The next frame's type and payload; nullopt at the end of the stream.
  std::optional<std::pair<Type, Bytes>> read_frame() {
    std::uint8_t h[store_wire::kHeaderSize];
    if (!read_all(h, sizeof(h))) return std::nullopt;
    auto header = store_wire::decode_header(h);
    Bytes payload(header.length);
    if (!read_all(payload.data(), payload.size())) return std::nullopt;
    return std::make_pair(header.type, payload);
  }
  // Says hello and proves nothing (a store without a secret accepts that).
  void handshake_without_secret() {
    send_frame(store_wire::Writer(Type::kHello).bytes(control::random_nonce()));
    ASSERT_EQ(read_frame()->first, Type::kChallenge);
    send_frame(store_wire::Writer(Type::kProof).bytes(Bytes{}));
    ASSERT_EQ(read_frame()->first, Type::kWelcome);
  }
  // True when the server closed the connection (end of stream or reset) within 5 s.
  bool closed_by_server() {
    std::uint8_t c;
    while (true) {
      ssize_t n = recv(fd_, &c, 1, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0) return false;  // the receive timeout: still open
    }
  }
  int fd() const { return fd_; }

 private:
  bool read_all(std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      ssize_t got = recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
};

TEST(StoreAuthentication, TheRightSecretIsServedAndEveryWrongOneIsRefusedWithTheReason) {
  TcpStoreServer server("127.0.0.1", 0, with_secret("s3cret"));
  auto good = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s), "s3cret");
  good->set("k", b("v"));
  EXPECT_EQ(good->get("k"), b("v"));

  ::testing::internal::CaptureStderr();
  auto wrong =
      error_of([&] { connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s), "guess"); },
               ErrorCode::kInvalidInput);
  EXPECT_NE(wrong.find("authentication failed: the client's secret is not this store's"),
            std::string::npos)
      << wrong;
  auto none = error_of([&] { connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)); },
                       ErrorCode::kInvalidInput);
  EXPECT_NE(none.find("requires the group's secret and this rank has none"), std::string::npos)
      << none;
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("authentication failed"), std::string::npos) << log;
  // Refused clients are gone; the group's client never noticed.
  for (int i = 0; i < 500 && server.client_count() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.client_count(), 1u);
  EXPECT_EQ(good->get("k"), b("v"));
}

TEST(StoreAuthentication, AClientWithASecretRefusesAStoreThatCannotProveIt) {
  TcpStoreServer open_store("127.0.0.1", 0);
  auto e = error_of(
      [&] { connect_tcp_store("127.0.0.1", open_store.port(), Deadline::after(5s), "ours"); },
      ErrorCode::kInvalidInput);
  EXPECT_NE(e.find("does not know this group's secret: it belongs to another group"),
            std::string::npos)
      << e;
}

TEST(StoreAuthentication, ARequestBeforeTheHandshakeGetsOneErrorAndAClosedConnection) {
  TcpStoreServer server("127.0.0.1", 0, with_secret("s3cret"));
  ::testing::internal::CaptureStderr();
  RawClient stranger(server.port());
  stranger.send_frame(store_wire::Writer(Type::kSet).string("tpcomm/0/0").bytes(b("forged")));
  auto reply = stranger.read_frame();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->first, Type::kError);
  std::string text = store_wire::Reader(reply->second.data(), reply->second.size()).string();
  EXPECT_NE(text.find("before the handshake"), std::string::npos) << text;
  EXPECT_TRUE(stranger.closed_by_server());
  // A forged proof is refused the same way, and neither wrote anything.
  RawClient forger(server.port());
  forger.send_frame(store_wire::Writer(Type::kHello).bytes(control::random_nonce()));
  ASSERT_EQ(forger.read_frame()->first, Type::kChallenge);
  forger.send_frame(store_wire::Writer(Type::kProof).bytes(Bytes(32, 0x42)));
  EXPECT_EQ(forger.read_frame()->first, Type::kError);
  EXPECT_TRUE(forger.closed_by_server());
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(server.key_count(), 0u);
}

TEST(StoreAuthentication, ProofsDependOnTheSecretAndOnBothNoncesAndNeverContainTheSecret) {
  const Bytes n1 = control::random_nonce(), n2 = control::random_nonce();
  const Bytes p = control::client_proof("secret-one", n1, n2);
  EXPECT_EQ(p.size(), 32u);
  EXPECT_TRUE(control::same_proof(p, control::client_proof("secret-one", n1, n2)));
  EXPECT_FALSE(control::same_proof(p, control::client_proof("secret-two", n1, n2)));
  EXPECT_FALSE(control::same_proof(p, control::client_proof("secret-one", n2, n1)));
  EXPECT_FALSE(control::same_proof(p, control::server_proof("secret-one", n1, n2)));
  const std::string secret = "secret-one";
  EXPECT_EQ(std::search(p.begin(), p.end(), secret.begin(), secret.end()), p.end());
  EXPECT_NE(control::generate_store_secret(), control::generate_store_secret());
  EXPECT_EQ(control::generate_store_secret().size(), 64u);
}

TEST(StoreLimits, ValuesAboveTheLimitAndAFullStoreAreRefusedAndTheConnectionStays) {
  TcpStoreOptions o;
  o.limits.max_value_bytes = 1000;
  o.limits.max_total_bytes = 3000;
  TcpStoreServer server("127.0.0.1", 0, o);
  auto s = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
  auto big = error_of([&] { s->set("big", Bytes(1001, 1)); }, ErrorCode::kInvalidInput);
  EXPECT_NE(big.find("a value of 1001 bytes for big is above the store's limit of 1000"),
            std::string::npos)
      << big;
  s->set("a", Bytes(1000, 1));
  s->set("b", Bytes(1000, 2));
  auto full = error_of([&] { s->set("c", Bytes(1000, 3)); }, ErrorCode::kInvalidInput);
  EXPECT_NE(full.find("the store is full"), std::string::npos) << full;
  EXPECT_FALSE(s->get("c"));
  // Replacing a value counts only the difference; freeing makes room again.
  s->set("a", Bytes(900, 4));
  EXPECT_TRUE(s->remove("b"));
  s->set("c", Bytes(1000, 3));
  EXPECT_EQ(s->get("c"), Bytes(1000, 3));
  EXPECT_EQ(s->get("a"), Bytes(900, 4));
}

TEST(StoreLimits, AClientThatPipelinesRequestsAndNeverReadsHoldsOneReplyAndIsDropped) {
  TcpStoreOptions o;
  o.limits.unread_reply_timeout = 500ms;
  TcpStoreServer server("127.0.0.1", 0, o);
  auto s = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
  s->set("big", Bytes(4 << 20, 7));
  ::testing::internal::CaptureStderr();
  RawClient greedy(server.port());
  greedy.handshake_without_secret();
  int small = 0;
  setsockopt(greedy.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  for (int i = 0; i < 80; ++i) {
    Bytes f = store_wire::Writer(Type::kGet).string("big").frame();
    if (::send(greedy.fd(), f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT) <= 0) break;
  }
  // The group's own client is served meanwhile, and the greedy one goes.
  s->set("k", b("v"));
  EXPECT_EQ(s->get("k"), b("v"));
  for (int i = 0; i < 500 && server.client_count() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.client_count(), 1u);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("of replies unread for 500 ms"), std::string::npos) << log;
}

TEST(StoreLimits, IdleConnectionsNeverCrowdOutTheGroup) {
  TcpStoreOptions o;
  o.limits.max_handshaking = 8;
  o.limits.handshake_timeout = 300ms;
  TcpStoreServer server("127.0.0.1", 0, o);
  ::testing::internal::CaptureStderr();
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawClient>(server.port()));
  auto s = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
  s->set("k", b("v"));
  EXPECT_EQ(s->get("k"), b("v"));
  EXPECT_LE(server.client_count(), 9u);  // at most 8 in their handshake, plus the group's client
  for (int i = 0; i < 500 && server.client_count() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.client_count(), 1u) << "idle connections are dropped after the handshake time";
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("more than 8 connections are in their handshake"), std::string::npos) << log;
  EXPECT_NE(log.find("no handshake within 300 ms"), std::string::npos) << log;
}

TEST(GroupScope, TwoNamedGroupsOnOneStoreNeverSeeEachOthersKeys) {
  TcpStoreServer server("127.0.0.1", 0);
  auto raw = [&] { return connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)); };
  auto a0 = control::join_group(raw(), "store", "job-a", 0, Deadline::after(5s));
  auto b0 = control::join_group(raw(), "store", "job-b", 0, Deadline::after(5s));
  a0->set("tpcomm/0/0", b("from a"));
  b0->set("tpcomm/0/0", b("from b"));
  EXPECT_EQ(a0->get("tpcomm/0/0"), b("from a"));
  EXPECT_EQ(b0->get("tpcomm/0/0"), b("from b"));
  EXPECT_EQ(b0->wait_for({"tpcomm/0/0", "tpcomm/0/1"}, Deadline::after(50ms)),
            std::vector<std::string>{"tpcomm/0/1"});
}

TEST(GroupScope, ASecondProcessForOneRankFailsAndBreaksTheGroupForEveryRank) {
  TcpStoreServer server("127.0.0.1", 0);
  auto raw = [&] { return connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)); };
  auto first = control::join_group(raw(), "store", "job", 1, Deadline::after(5s));
  auto e = error_of([&] { control::join_group(raw(), "store", "job", 1, Deadline::after(5s)); },
                    ErrorCode::kMismatch);
  EXPECT_NE(e.find("rank 1 joined group job twice"), std::string::npos) << e;
  auto broken = error_of([&] { control::check_group_intact(*first); }, ErrorCode::kMismatch);
  EXPECT_EQ(broken, e);
}

TEST(GroupScope, ASecondAnonymousGroupOnAStoreIsRefusedAndTheFirstIsMarkedBroken) {
  TcpStoreServer server("127.0.0.1", 0);
  auto raw = [&] { return connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)); };
  auto a0 = control::join_group(raw(), "H:1", std::nullopt, 0, Deadline::after(5s));
  auto a1 = control::join_group(raw(), "H:1", std::nullopt, 1, Deadline::after(5s));
  control::check_group_intact(*a1);  // formed: rank 1 adopted rank 0's token
  a0->set("x", b("1"));
  EXPECT_EQ(a1->get("x"), b("1"));
  auto e =
      error_of([&] { control::join_group(raw(), "H:1", std::nullopt, 0, Deadline::after(5s)); },
               ErrorCode::kMismatch);
  EXPECT_NE(e.find("two groups met on the store at H:1"), std::string::npos) << e;
  EXPECT_NE(e.find("set TPCOMM_GROUP_ID per job"), std::string::npos) << e;
  auto broken = error_of([&] { control::check_group_intact(*a0); }, ErrorCode::kMismatch);
  EXPECT_EQ(broken, e);
}

TEST(GroupScope, ARankSlotAndAnAnonymousClaimAreFreedWhenTheirProcessGoes) {
  TcpStoreServer server("127.0.0.1", 0);
  auto raw = [&] { return connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)); };
  {
    auto first = control::join_group(raw(), "H:1", std::nullopt, 0, Deadline::after(5s));
  }  // its connection closes: the next job on this store may claim it
  for (int i = 0; i < 500 && server.client_count() > 0; ++i) std::this_thread::sleep_for(10ms);
  auto next = control::join_group(raw(), "H:1", std::nullopt, 0, Deadline::after(5s));
  control::check_group_intact(*next);
}

TEST(SlurmNodeList, TheFirstHostOfEveryFormOfHostList) {
  EXPECT_EQ(control::first_host_of_nodelist("localhost"), "localhost");
  EXPECT_EQ(control::first_host_of_nodelist("gpu7,gpu9"), "gpu7");
  EXPECT_EQ(control::first_host_of_nodelist("node[01-04,07]"), "node01");
  EXPECT_EQ(control::first_host_of_nodelist("node[3,5-6],login1"), "node3");
  EXPECT_EQ(control::first_host_of_nodelist("rack[2-3]-gpu"), "rack2-gpu");
  EXPECT_EQ(control::first_host_of_nodelist("a-b-c[010-012]"), "a-b-c010");
  EXPECT_THROW(control::first_host_of_nodelist("node[01-04"), Error);
  EXPECT_THROW(control::first_host_of_nodelist("node[x]"), Error);
}

}  // namespace
}  // namespace tpcomm
