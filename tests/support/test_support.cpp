// Test helpers: fixtures and child processes (stdout and stderr captured through temp files).
#include "test_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "tpcomm/facts_json.hpp"

namespace tpcomm::test {

std::string fixture_path(const std::string& relative) {
  return std::string(TPCOMM_FIXTURES_DIR) + "/" + relative;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("test fixture missing: " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

FactsTable load_facts(const std::string& relative) {
  return decode_facts(read_file(fixture_path(relative)));
}

std::vector<std::string> fixture_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture_path(folder))) {
    if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> expectations(const std::string& folder) {
  std::istringstream in(read_file(fixture_path(folder + "/EXPECTED.tsv")));
  std::vector<std::pair<std::string, std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto tab = line.find('\t');
    if (tab == std::string::npos) throw std::runtime_error("bad EXPECTED.tsv line: " + line);
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

namespace {

// Waits for `pid` until `until`; true with its status when it ended.
bool wait_until(pid_t pid, std::chrono::steady_clock::time_point until, int* status) {
  while (true) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // nothing to wait for
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env,
                          std::chrono::seconds limit) {
  char out_path[] = "/tmp/tpcomm_test_out_XXXXXX";
  char err_path[] = "/tmp/tpcomm_test_err_XXXXXX";
  int out_fd = mkstemp(out_path);
  int err_fd = mkstemp(err_path);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so that a stop on timeout reaches what it started
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    for (const auto& [k, v] : env) {
      if (v.empty()) {
        unsetenv(k.c_str());
      } else {
        setenv(k.c_str(), v.c_str(), 1);
      }
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the child's own call
  int status = 0;
  ProcessResult r;
  if (!wait_until(pid, std::chrono::steady_clock::now() + limit, &status)) {
    r.timed_out = true;
    kill(-pid, SIGTERM);
    if (!wait_until(pid, std::chrono::steady_clock::now() + std::chrono::seconds(5), &status)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    ADD_FAILURE() << "still running after " << limit.count() << " s, stopped: " << joined(argv);
  }
  close(out_fd);
  close(err_fd);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  unlink(out_path);
  unlink(err_path);
  return r;
}

pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& out_path) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) {
      if (v.empty()) {
        unsetenv(k.c_str());
      } else {
        setenv(k.c_str(), v.c_str(), 1);
      }
    }
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(out, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

std::uint16_t free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace tpcomm::test
