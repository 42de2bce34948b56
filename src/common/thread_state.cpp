// /proc/<tid>/stat: "tid (comm) S ppid ..." with the CPU last run on as field 39. comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
#include "thread_state.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fork_generation.hpp"

namespace tpcomm::common {
namespace {

constexpr int kCpuField = 39;   // "processor" in proc(5)
constexpr int kStateField = 3;  // the first field after comm

}  // namespace

std::optional<ThreadState> read_thread_state(int tid) {
  if (tid <= 0) return std::nullopt;
  char path[48];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", tid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[1024];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  const char* at = std::strrchr(text, ')');
  if (at == nullptr || at[1] != ' ') return std::nullopt;
  at += 2;
  ThreadState state;
  state.runnable = *at == 'R';
  for (int field = kStateField; field < kCpuField; ++field) {
    at = std::strchr(at, ' ');
    if (at == nullptr) return std::nullopt;
    ++at;
  }
  char* end = nullptr;
  const long cpu = std::strtol(at, &end, 10);
  if (end == at) return std::nullopt;
  state.cpu = static_cast<int>(cpu);
  return state;
}

int this_thread_id() {
  // A fork() child's thread inherits the parent thread's cache: the generation tells them apart.
  thread_local std::uint64_t generation = ~std::uint64_t{0};
  thread_local int tid = 0;
  if (const std::uint64_t now = process_fork_generation(); now != generation) {
    generation = now;
    tid = static_cast<int>(::syscall(SYS_gettid));
  }
  return tid;
}

}  // namespace tpcomm::common
