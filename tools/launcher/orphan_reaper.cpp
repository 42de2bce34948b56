// Stopping what the ranks left running (orphan_reaper.hpp).
#include "orphan_reaper.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace tpcomm::cli {
namespace {

struct ProcessStat {
  pid_t parent = 0;
  char state = '?';
  std::string name;
};

// "pid (name) state ppid ...": the name may hold spaces and parentheses, so the fields after it
// are found from its last ')'. Read with open/read: a process that exits between the open and
// the read makes read() fail with ESRCH, which an ifstream read through istreambuf_iterator
// threw out of the launcher as an internal error (seen once in the suite, DumpFactsTarget).
bool read_stat(pid_t pid, ProcessStat& s) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[1024];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  ::close(fd);
  if (n <= 0) return false;
  const std::string text(buffer, static_cast<std::size_t>(n));
  const auto open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 > text.size())
    return false;
  s.name = text.substr(open + 1, close - open - 1);
  s.state = text[close + 2];
  s.parent = static_cast<pid_t>(std::atol(text.c_str() + close + 4));
  return true;
}

std::vector<std::pair<pid_t, ProcessStat>> children_with_stat() {
  std::vector<std::pair<pid_t, ProcessStat>> out;
  const pid_t self = getpid();
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const auto pid = static_cast<pid_t>(std::atol(e->d_name));
    ProcessStat s;
    if (read_stat(pid, s) && s.parent == self) out.emplace_back(pid, s);
  }
  closedir(dir);
  return out;
}

}  // namespace

bool become_subreaper() {
  return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
}

std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> pids;
  for (const auto& [pid, s] : children_with_stat()) pids.push_back(pid);
  return pids;
}

StoppedDescendants stop_descendants(const std::vector<pid_t>& keep,
                                    std::chrono::milliseconds limit) {
  StoppedDescendants result;
  std::set<pid_t> signalled;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    std::vector<std::string> alive;
    bool any = false;
    for (const auto& [pid, s] : children_with_stat()) {
      if (std::find(keep.begin(), keep.end(), pid) != keep.end()) continue;
      any = true;
      // A killed process's children are re-parented here before it becomes a zombie, so the
      // next pass finds them.
      if (s.state == 'Z') {
        if (waitpid(pid, nullptr, WNOHANG) == pid) signalled.erase(pid);
        continue;
      }
      alive.push_back(fmt::format("{} ({})", pid, s.name));
      if (signalled.insert(pid).second && kill(pid, SIGKILL) == 0) {
        result.stopped.push_back(alive.back());
      }
    }
    if (!any) break;
    if (std::chrono::steady_clock::now() >= until) {
      result.left = alive;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

// Once every rank has ended: whatever they started that is still running, in their process
// groups or out of them, is killed (SIGKILL, as after --grace), and the user is told.
void stop_what_the_ranks_left(const std::vector<pid_t>& children_before) {
  const auto left = stop_descendants(children_before, std::chrono::seconds(2));
  if (!left.stopped.empty()) {
    std::cerr << fmt::format("tpcomm run: stopped {} process{} the ranks left running: {}\n",
                             left.stopped.size(), left.stopped.size() == 1 ? "" : "es",
                             fmt::join(left.stopped, ", "));
  }
  if (!left.left.empty()) {
    std::cerr << fmt::format("tpcomm run: could not stop {} (still running after 2 s)\n",
                             fmt::join(left.left, ", "));
  }
}

}  // namespace tpcomm::cli
