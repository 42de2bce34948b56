// Network namespaces for tests that need more than one host on one machine: N namespaces, each
// with one address from 198.18.0.0/15 (the benchmarking range, never routed), joined by veth
// pairs to a bridge in a hub namespace of their own (nothing touches the host's network). A link
// between two of them can be cut silently (nftables drops the peer's packets on both sides, as a
// partitioned network does: no reset, no "unreachable") and healed. Everything is removed in the
// destructor, also when the test fails; names carry the test process's pid, so parallel test
// runs do not collide, and namespaces left by a test process that died are removed on the next
// creation.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace tpcomm::test {

class NetNamespaces {
 public:
  // `count` namespaces, or null with `why` set where they cannot be made here (not root, no
  // `ip` or `nft`, no permission): the test then does GTEST_SKIP() << why.
  static std::unique_ptr<NetNamespaces> create(int count, std::string* why);
  ~NetNamespaces();
  NetNamespaces(const NetNamespaces&) = delete;
  NetNamespaces& operator=(const NetNamespaces&) = delete;

  int count() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_.at(static_cast<std::size_t>(i)); }
  // Namespace i's address: 198.18.0.<i + 1>.
  std::string address(int i) const;
  // argv that runs `argv` inside namespace i (ip netns exec).
  std::vector<std::string> inside(int i, const std::vector<std::string>& argv) const;
  // Drops every packet between namespaces a and b, both ways, without telling either side; true
  // when done (a test failure names the command otherwise).
  bool cut(int a, int b);
  bool heal(int a, int b);

 private:
  NetNamespaces(std::string ip, std::string nft, std::string prefix, int count);
  bool make(std::string* why);
  // Runs `argv` (a path first); false with its output in `why` when it fails.
  static bool run(const std::vector<std::string>& argv, std::string* why);
  bool filter(int on, int from, bool drop);

  std::string ip_;
  std::string nft_;
  std::string hub_;
  std::vector<std::string> names_;
};

}  // namespace tpcomm::test
