// This process's token (process_token.hpp).
#include "process_token.hpp"

#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "common/fork_generation.hpp"

namespace tpcomm::transport::cuda {
namespace {

constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t mix(std::uint64_t h, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((value >> (8 * i)) & 0xff)) * kFnvPrime;  // FNV-1a
  return h;
}

// Drawn once per program (a fork() child inherits it: see this_process()).
std::uint64_t drawn_token() {
  std::random_device rd;
  std::uint64_t t = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  for (char c : boot) t = (t ^ static_cast<std::uint8_t>(c)) * kFnvPrime;
  return t;
}

}  // namespace

std::uint64_t this_process() {
  static const std::uint64_t token = drawn_token();
  // Recomputed on every call, not cached: the threads of one process agree on it without a lock,
  // and a child forked at any moment (even while another thread is here) differs from its parent
  // and from its siblings: by pid, and by fork generation where a new PID namespace reuses a pid.
  return mix(mix(token, static_cast<std::uint64_t>(getpid())), common::process_fork_generation());
}

}  // namespace tpcomm::transport::cuda
