// What the tests of `tpcomm run --nodes` with the node network share: whether it can be made
// here, the network namespaces processes are in, and waiting for them to go.
#pragma once

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace tpcomm::test::node_network {

// Why this test cannot make the node network here (not root, `programs` missing); "" when it can.
std::string why_not_here(const std::vector<std::string>& programs);

// A string unique to this test process and call, to find the processes of one run.
std::string mark();

// pid -> network namespace ("net:[N]") of every process; `only_with`: those whose command line
// holds it.
std::map<std::string, std::string> network_namespaces(const std::string& only_with = "");

// Processes whose environment holds `entry` ("NAME=VALUE"): what one run started, however deep
// (mpirun's daemons and their ranks inherit the launcher's environment), apart from what a test
// running beside it started.
std::vector<std::string> processes_with_environment(const std::string& entry);
// Waits up to 5 s until none is left.
bool none_left_with_environment(const std::string& entry);

// Processes still in any of `namespaces`.
int processes_in(const std::set<std::string>& namespaces);

// Waits up to 5 s until no process is in `namespaces` (they end with their last process).
bool all_gone(const std::set<std::string>& namespaces);

// Every match of `re` in `text`.
std::vector<std::smatch> matches(const std::string& text, const std::regex& re);

}  // namespace tpcomm::test::node_network
