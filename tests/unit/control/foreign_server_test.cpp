// A server on the store's port that is not a tpcomm store (torchrun's c10d store, a web server):
// the client says exactly that, never "unreachable".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Listens on a free loopback port; each accepted connection gets `answer` (after reading what the
// client sent), then is closed.
class ForeignServer {
 public:
  explicit ForeignServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 4);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[256];
      (void)!read(c, buf, sizeof(buf));
      if (!answer_.empty()) (void)!write(c, answer_.data(), answer_.size());
      close(c);
    });
  }
  ~ForeignServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  std::string answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

std::string fmt_port(const char* before, std::uint16_t port, const char* after) {
  return before + std::to_string(port) + after;
}

std::string connect_error(std::uint16_t port) {
  try {
    connect_tcp_store("127.0.0.1", port, Deadline::after(5s));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "connected to a server that is not a tpcomm store";
  return {};
}

TEST(ForeignServer, OneThatClosesTheConnectionIsNamedAsNotATpcommStore) {
  ForeignServer c10d_like("");  // torchrun's store drops a client whose request it cannot parse
  const std::string e = connect_error(c10d_like.port());
  EXPECT_NE(
      e.find(fmt_port("the server at 127.0.0.1:", c10d_like.port(), " is not a tpcomm store")),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("torchrun's own store listens on MASTER_PORT"), std::string::npos) << e;
  EXPECT_EQ(e.find("unreachable"), std::string::npos) << e;
}

TEST(ForeignServer, OneThatAnswersSomethingElseIsNamedAsNotATpcommStore) {
  ForeignServer http("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  const std::string e = connect_error(http.port());
  EXPECT_NE(e.find("is not a tpcomm store"), std::string::npos) << e;
  EXPECT_NE(e.find("bad magic"), std::string::npos) << e;
  EXPECT_EQ(e.find("unreachable"), std::string::npos) << e;
}

}  // namespace
}  // namespace tpcomm
