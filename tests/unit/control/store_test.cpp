// Stores: the same semantics from the in-memory and the TCP store; deadlines that name missing
// keys; a TCP server that drops misbehaving clients and keeps serving the others.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "tpcomm/error.hpp"
#include "tpcomm/store.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

Bytes b(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

class StoreSemantics : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = make_memory_store();
    } else {
      server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
      store_ = connect_tcp_store("127.0.0.1", server_->port(), Deadline::after(5s));
    }
  }
  // Another client of the same store (a TCP client serves one request at a time).
  std::shared_ptr<Store> another() {
    if (!server_) return store_;
    return connect_tcp_store("127.0.0.1", server_->port(), Deadline::after(5s));
  }
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreSemantics, SetGetAddCompareSetRemove) {
  EXPECT_FALSE(store_->get("a").has_value());
  store_->set("a", b("1"));
  EXPECT_EQ(store_->get("a"), b("1"));
  EXPECT_EQ(store_->add("n", 5), 5);
  EXPECT_EQ(store_->add("n", -2), 3);
  EXPECT_EQ(store_->compare_set("c", std::nullopt, b("first")), b("first"));
  EXPECT_EQ(store_->compare_set("c", std::nullopt, b("second")), b("first"));  // already set
  EXPECT_EQ(store_->compare_set("c", b("first"), b("third")), b("third"));
  EXPECT_EQ(store_->size(), 3u);
  EXPECT_TRUE(store_->remove("a"));
  EXPECT_FALSE(store_->remove("a"));
  EXPECT_EQ(store_->size(), 2u);
  store_->set("big", Bytes(1 << 20, 7));
  EXPECT_EQ(store_->get("big")->size(), 1u << 20);
}

TEST_P(StoreSemantics, WaitReturnsWhenKeysArriveAndNamesMissingKeysOnTimeout) {
  auto other = another();
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    other->set("later", b("x"));
  });
  EXPECT_TRUE(store_->wait_for({"later"}, Deadline::after(5s)).empty());
  writer.join();
  const auto start = Deadline::Clock::now();
  auto missing = store_->wait_for({"later", "never", "nope"}, Deadline::after(200ms));
  EXPECT_EQ(missing, (std::vector<std::string>{"never", "nope"}));
  EXPECT_GE(Deadline::Clock::now() - start, 190ms);
  try {
    store_->wait({"never"}, Deadline::after(50ms));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("keys still missing: never"), std::string::npos)
        << e.what();
  }
}

TEST_P(StoreSemantics, AddOnAValueThatIsNotAnIntegerIsAnErrorNamingTheKeyAndChangesNothing) {
  store_->set("word", b("seven"));
  store_->set("tail", b("7x"));
  for (const char* key : {"word", "tail"}) {
    try {
      store_->add(key, 1);
      FAIL() << key;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
      EXPECT_NE(
          std::string(e.what()).find(std::string("the value of ") + key + " is not an integer"),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(store_->get("word"), b("seven"));
  EXPECT_EQ(store_->add("n", -7), -7);  // the store (and a TCP client's connection) goes on
}

// Found by the store fuzzer (tests/fuzz/corpus/store/add_overflow.bin): an ADD past the largest
// 64-bit integer was undefined behaviour in the store; it is an error that changes nothing.
TEST_P(StoreSemantics, AddThatWouldOverflowIsAnErrorAndChangesNothing) {
  store_->set("n", b("9223372036854775807"));
  for (std::int64_t delta : {std::int64_t{1}, INT64_MAX}) {
    try {
      store_->add("n", delta);
      FAIL() << "no error for + " << delta;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
      EXPECT_NE(std::string(e.what()).find("overflows a 64-bit integer"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(store_->get("n"), b("9223372036854775807"));
  EXPECT_EQ(store_->add("n", -7), INT64_MAX - 7);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreSemantics, ::testing::Values("memory", "tcp"));

int raw_connect(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// Waits until the server has dropped the raw client (it reads EOF).
bool dropped(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  return recv(fd, &c, 1, 0) == 0;
}

TEST(TcpStoreServer, DropsGarbageTruncatedAndOversizedClientsAndKeepsServing) {
  TcpStoreServer server("127.0.0.1", 0);
  auto good = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
  good->set("k", b("v"));

  ::testing::internal::CaptureStderr();
  int garbage = raw_connect(server.port());
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(send(garbage, http, sizeof(http) - 1, 0), 0);
  EXPECT_TRUE(dropped(garbage));
  close(garbage);

  int truncated = raw_connect(server.port());
  const std::uint8_t header_start[] = {0x54, 0x53, 0x50, 0x54, 2, 0, 1, 0, 100};  // 9 of 12 bytes
  ASSERT_GT(send(truncated, header_start, sizeof(header_start), 0), 0);
  close(truncated);  // the server reads the 9 bytes, then the end of the stream

  int oversized = raw_connect(server.port());
  const std::uint8_t huge[] = {0x54, 0x53, 0x50, 0x54, 2, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f};
  ASSERT_GT(send(oversized, huge, sizeof(huge), 0), 0);
  EXPECT_TRUE(dropped(oversized));
  close(oversized);

  int old_version = raw_connect(server.port());
  const std::uint8_t v9[] = {0x54, 0x53, 0x50, 0x54, 9, 0, 1, 0, 0, 0, 0, 0};
  ASSERT_GT(send(old_version, v9, sizeof(v9), 0), 0);
  EXPECT_TRUE(dropped(old_version));
  close(old_version);
  // Every bad client is gone (the server logs each drop before it forgets the client).
  for (int i = 0; i < 500 && server.client_count() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.client_count(), 1u);
  const std::string log = ::testing::internal::GetCapturedStderr();

  EXPECT_NE(log.find("bad magic 0x20544547 (not a tpcomm store frame)"), std::string::npos) << log;
  EXPECT_NE(log.find("connection closed in the middle of a frame (9 of 12 bytes)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("is above the limit of"), std::string::npos) << log;
  EXPECT_NE(log.find("protocol version 9 (this store speaks 2)"), std::string::npos) << log;
  EXPECT_NE(log.find("the store keeps serving the others"), std::string::npos) << log;
  // The well-behaved client never noticed.
  EXPECT_EQ(good->get("k"), b("v"));
  good->set("k2", b("v2"));
  EXPECT_EQ(server.key_count(), 2u);
}

TEST(TcpStoreServer, EphemeralKeysVanishWithTheirClient) {
  TcpStoreServer server("127.0.0.1", 0);
  auto watcher = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
  {
    auto owner = connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s));
    owner->set_ephemeral("alive/1", b("1"));
    owner->set("durable", b("1"));
    EXPECT_TRUE(watcher->get("alive/1").has_value());
  }  // the connection closes
  for (int i = 0; i < 50 && watcher->get("alive/1"); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(watcher->get("alive/1").has_value());
  EXPECT_TRUE(watcher->get("durable").has_value());
}

TEST(TcpStoreClient, UnreachableStoreTimesOutNamingTheAddress) {
  // A port nobody listens on: bind one, note it, close it.
  std::uint16_t port;
  {
    TcpStoreServer s("127.0.0.1", 0);
    port = s.port();
  }
  try {
    connect_tcp_store("127.0.0.1", port, Deadline::after(200ms));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(
        std::string(e.what()).find("cannot reach the store at 127.0.0.1:" + std::to_string(port)),
        std::string::npos)
        << e.what();
  }
}

TEST(TcpStoreClient, ServerGoingAwayIsAnErrorNotAHang) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  auto client = connect_tcp_store("127.0.0.1", server->port(), Deadline::after(5s));
  client->set("a", b("1"));
  server.reset();
  try {
    client->wait({"never"}, Deadline::after(2s));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("is unreachable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpcomm
