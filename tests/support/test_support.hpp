// Helpers for tests: fixture paths and files, expectation tables, running the real binary.
#pragma once

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
};

// Runs a program with extra environment variables (an empty value unsets one), and waits.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {});

}  // namespace tpcomm::test
