// Helpers for tests: fixture paths and files, expectation tables, running the real binary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tpcomm/facts.hpp"

namespace tpcomm::test {

std::string fixture_path(const std::string& relative);  // under tests/fixtures
std::string read_file(const std::string& path);
FactsTable load_facts(const std::string& relative);
// .json files of a fixtures folder, sorted.
std::vector<std::string> fixture_files(const std::string& folder);
// An EXPECTED.tsv table: file name -> expected message part.
std::vector<std::pair<std::string, std::string>> expectations(const std::string& folder);

struct ProcessResult {
  int exit_code = -1;  // the process's exit status; 128+N when killed by signal N
  std::string out;
  std::string err;
  bool timed_out = false;  // it outlived its limit and was stopped (the test has failed)
};

// Runs a program with extra environment variables (an empty value unsets one), and waits at most
// `limit`: a program still running then gets SIGTERM (a launcher stops its ranks), then SIGKILL
// 5 s later, and the calling test fails naming the command.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {},
                          std::chrono::seconds limit = std::chrono::seconds(120));

// Launches a program in the background with extra environment variables (an empty value unsets
// one), its output into `out_path` (default: discarded, never the test's own stderr, which a
// runner reading it would wait on); returns its pid.
pid_t spawn(const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& env = {},
            const std::string& out_path = "/dev/null");

// A TCP port on loopback that nothing listens on now (bound, read, released).
std::uint16_t free_loopback_port();

}  // namespace tpcomm::test
