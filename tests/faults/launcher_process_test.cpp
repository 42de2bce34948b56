// What `tpcomm run` holds and leaves behind: a rank writing without newlines does not grow the
// launcher's memory, and what a rank started, even in a new session, ends with the job.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace tpcomm {
namespace {

using Clock = std::chrono::steady_clock;

// The launcher's stdout as the test reads it: "[0] " before every line, the bytes after it.
struct OutputShape {
  std::uint64_t payload = 0;  // bytes other than prefixes and newlines
  std::uint64_t lines = 0;
  std::uint64_t longest = 0;  // the longest line, without its prefix
  std::uint64_t unprefixed = 0;
  std::uint64_t line_length = 0;
  std::size_t prefix_seen = 0;  // bytes of the prefix read at the start of this line

  void feed(const char* data, std::size_t n) {
    static const std::string kPrefix = "[0] ";
    for (std::size_t i = 0; i < n;) {
      if (prefix_seen < kPrefix.size()) {  // a prefix may be split across reads
        if (data[i] != kPrefix[prefix_seen]) {
          ++unprefixed;
          prefix_seen = kPrefix.size();
          continue;
        }
        ++prefix_seen;
        ++i;
        continue;
      }
      const char* nl = static_cast<const char*>(std::memchr(data + i, '\n', n - i));
      const std::size_t end = nl ? static_cast<std::size_t>(nl - data) : n;
      payload += end - i;
      line_length += end - i;
      i = end;
      if (nl) {
        ++lines;
        longest = std::max(longest, line_length);
        line_length = 0;
        prefix_seen = 0;
        ++i;
      }
    }
  }
};

struct Measured {
  OutputShape shape;
  int exit_code = -1;
  long max_rss_kib = 0;  // the launcher's peak, or its ranks' when larger (they are small here)
};

// Runs `tpcomm run -n 1 -- /bin/sh -c SCRIPT`, counting its stdout as it comes (the test never
// holds it) and taking the launcher's peak resident size from wait4().
Measured run_counting(const std::string& script) {
  int out[2];
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execl(TPCOMM_BIN, TPCOMM_BIN, "run", "-n", "1", "--", "/bin/sh", "-c", script.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  Measured m;
  const auto until = Clock::now() + std::chrono::seconds(120);
  std::vector<char> buf(1 << 16);
  while (Clock::now() < until) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = read(out[0], buf.data(), buf.size());
    if (n <= 0) break;
    m.shape.feed(buf.data(), static_cast<std::size_t>(n));
  }
  close(out[0]);
  if (Clock::now() >= until) {
    ADD_FAILURE() << "tpcomm run still writing after 120 s; stopped";
    kill(-pid, SIGKILL);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.max_rss_kib = usage.ru_maxrss;
  return m;
}

std::string writes_without_newline(std::uint64_t bytes) {
  return "head -c " + std::to_string(bytes) + " /dev/zero | tr '\\000' x";
}

// 64 MiB in one line: the launcher passes it on in pieces of at most 64 KiB (docs/errors.md),
// each a prefixed line, every byte arriving, and its memory stays near what a short line takes.
TEST(LauncherOutput, ALineWithoutNewlineIsPassedOnInBoundedPieces) {
  constexpr std::uint64_t kBig = std::uint64_t{64} << 20, kPiece = std::uint64_t{64} << 10;
  const Measured small = run_counting(writes_without_newline(kPiece / 2));
  ASSERT_EQ(small.exit_code, 0);
  ASSERT_EQ(small.shape.payload, kPiece / 2);
  const Measured big = run_counting(writes_without_newline(kBig));
  EXPECT_EQ(big.exit_code, 0);
  EXPECT_EQ(big.shape.payload, kBig) << "every byte arrives";
  EXPECT_EQ(big.shape.unprefixed, 0u) << "every piece is a line with the rank's prefix";
  EXPECT_LE(big.shape.longest, kPiece);
  EXPECT_EQ(big.shape.lines, kBig / kPiece) << "cut only where the bound is reached";
  // Holding the line would take at least 64 MiB more than the short run; 16 MiB leaves room for
  // allocator noise (and the sanitizer build's) while staying far below it.
  EXPECT_LT(big.max_rss_kib, small.max_rss_kib + 16 * 1024)
      << "launcher peak " << big.max_rss_kib << " KiB against " << small.max_rss_kib
      << " KiB for a 32 KiB line";
}

// --- what ranks start ---

bool alive(pid_t pid) {
  return kill(pid, 0) == 0 || errno != ESRCH;
}

// Gone (and reaped: a zombie still answers kill 0) within `limit`.
bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (alive(pid)) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<pid_t> pids_after(const std::string& text, const std::string& word) {
  std::vector<pid_t> pids;
  std::regex re(word + " (\\d+)");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    pids.push_back(static_cast<pid_t>(std::stol((*it)[1])));
  }
  return pids;
}

// A process this test made that outlived the check (the defect) is stopped here, so a failing
// run leaves nothing either; only a process still running our `sleep 1000`.
void stop_leftover(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (cmd.find("1000") != std::string::npos) kill(pid, SIGKILL);
}

// Rank 0 starts a daemon the usual way (a subshell that exits, and setsid: a new session and
// process group, out of reach of the launcher's process-group signals) that has a child of its
// own, and an orphan that ends with status 7 while the job runs; then the rank exits 0.
const std::string kRankZeroDaemon =
    "( setsid sh -c 'echo daemon $$; sleep 1000 & echo grandchild $!; wait' & ); "
    "( sh -c 'sleep 0.2; exit 7' & ); ";

void expect_started_processes_gone(const std::string& out) {
  const auto daemons = pids_after(out, "daemon"), grandchildren = pids_after(out, "grandchild");
  ASSERT_EQ(daemons.size(), 1u) << out;
  ASSERT_EQ(grandchildren.size(), 1u) << out;
  for (pid_t pid : {daemons[0], grandchildren[0]}) {
    EXPECT_TRUE(gone_within(pid, std::chrono::seconds(5)))
        << "process " << pid << " that a rank started outlived tpcomm run";
    stop_leftover(pid);
  }
}

TEST(LauncherCleanup, ADaemonARankStartedEndsWithTheJob) {
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then " + kRankZeroDaemon + "sleep 1; exit 0; fi; sleep 1.5; exit 0";
  auto r = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", "/bin/sh", "-c", script}, {},
                             std::chrono::seconds(60));
  // The orphan's status 7 is not a rank's: both ranks exited 0.
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("status 7"), std::string::npos) << r.err;
  expect_started_processes_gone(r.out);
  EXPECT_NE(r.err.find("stopped 2 processes the ranks left running"), std::string::npos) << r.err;
}

TEST(LauncherCleanup, ADaemonEndsWhenAnotherRankFailsTheJob) {
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then " + kRankZeroDaemon + "sleep 0.5; exit 3; fi; sleep 60";
  const auto started = Clock::now();
  auto r = test::run_process({TPCOMM_BIN, "run", "-n", "2", "--", "/bin/sh", "-c", script}, {},
                             std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(20)) << "rank 1 was stopped";
  expect_started_processes_gone(r.out);
}

TEST(LauncherCleanup, ADaemonEndsWhenTheLauncherIsInterrupted) {
  char out_path[] = "/tmp/tpcomm_launcher_out_XXXXXX";
  close(mkstemp(out_path));
  const std::string script = "if [ \"$RANK\" = 0 ]; then " + kRankZeroDaemon + "fi; sleep 60";
  const pid_t pid =
      test::spawn({TPCOMM_BIN, "run", "-n", "2", "--", "/bin/sh", "-c", script}, {}, out_path);
  std::string out;
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (pids_after(out, "grandchild").empty() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    out = test::read_file(out_path);
  }
  kill(pid, SIGTERM);
  int status = 0;
  const auto stop_until = Clock::now() + std::chrono::seconds(20);  // --grace is 3 s
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= stop_until) {
      ADD_FAILURE() << "tpcomm run still running 20 s after SIGTERM; killed";
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out = test::read_file(out_path);
  unlink(out_path);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143) << out;
  expect_started_processes_gone(out);
}

}  // namespace
}  // namespace tpcomm
