// tpcomm run and tpcomm store.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "control/store_auth.hpp"
#include "launcher.hpp"
#include "node_links.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::cli {
namespace {

// --node-network, --link-rate, --link-loss (node_network.hpp), checked when parsed.
void add_node_network_options(CLI::App& cmd, NodeNetworkOptions& net) {
  // A function option: nothing of this function's frame is left for CLI11 to write into later.
  cmd.add_option_function<std::string>(
         "--node-network",
         [&net](const std::string& m) {
           net.mode = m == "on"    ? NodeNetworkOptions::Mode::kOn
                      : m == "off" ? NodeNetworkOptions::Mode::kOff
                                   : NodeNetworkOptions::Mode::kAuto;
         },
         "with --nodes K: each node in a network namespace of its own, linked to the "
         "others over a bridge (198.18.0.<node + 1>); auto: when this process may (root, "
         "or CAP_SYS_ADMIN and CAP_NET_ADMIN), else it says why and the nodes share the "
         "host's network; on: refuse where it cannot")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->default_str("auto");
  cmd.add_option_function<std::string>(
      "--link-rate",
      [&net](const std::string& text) {
        std::string why;
        net.rate_bits = netlinks::parse_rate(text, &why);
        if (!net.rate_bits) throw CLI::ValidationError("--link-rate", why);
      },
      "each node's link rate, both ways (tc tbf), e.g. 100mbit, 10gbit; needs the node network");
  cmd.add_option_function<double>(
         "--link-loss", [&net](double percent) { net.loss_percent = percent; },
         "drop this percentage of the packets each node receives, at random (nftables); needs "
         "the node network")
      ->check(CLI::Range(0.0, 100.0));
  for (const auto kind : {LinkFault::Kind::kCut, LinkFault::Kind::kDown}) {
    cmd.add_option_function<std::vector<std::string>>(
           option_of(kind),
           [&net, kind](const std::vector<std::string>& texts) {
             for (const auto& text : texts) {
               std::string why;
               auto fault = parse_link_fault(text, kind, &why);
               if (!fault) throw CLI::ValidationError(option_of(kind), why);
               net.faults.push_back(*fault);
             }
           },
           kind == LinkFault::Kind::kCut
               ? "NODE@SECONDS: that many seconds after the ranks start, node NODE is cut off "
                 "(every "
                 "packet in and out of its link dropped, silently, as a failed switch port does; "
                 "nftables); repeatable; needs the node network"
               : "NODE@SECONDS: that many seconds after the ranks start, the bridge's end of node "
                 "NODE's link is set down (the cable pulled); repeatable; needs the node network")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_status) {
  auto opts = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Start N ranks of a program as one group (with a store), prefix their output with the "
      "rank, and stop them all when one fails");
  cmd->add_option("-n,--ranks", opts->ranks, "number of ranks")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nodes", opts->nodes,
                  "split the ranks over K simulated nodes (own UTS/IPC/mount namespaces, private "
                  "/dev/shm, hostname sim-node-<i>, and with --node-network their own network; "
                  "needs root)")
      ->capture_default_str();
  add_node_network_options(*cmd, opts->node_network);
  cmd->add_option("--timeout", opts->timeout_s, "stop the job after S seconds (exit status 124)");
  cmd->add_option("--grace", opts->grace_s, "seconds between SIGTERM and SIGKILL when stopping")
      ->capture_default_str();
  cmd->add_flag(
      "--keep-going", opts->keep_going,
      "when a rank fails, let the others end on their own (within TPCOMM_TIMEOUT_MS + 2 s, "
      "then they are stopped)");
  auto bind_to = std::make_shared<std::string>("none");
  cmd->add_option(
         "--bind-to", *bind_to,
         "core: each rank on a core of its own, or a hardware thread of its own when cores "
         "are fewer (docs/communicator.md)")
      ->check(CLI::IsMember({"core", "none"}))
      ->capture_default_str();
  cmd->add_option("command", opts->command, "-- PROGRAM ARGS...")->required();
  cmd->callback([opts, bind_to, &exit_status] {
    opts->bind_cores = *bind_to == "core";
    exit_status = launch(*opts);
  });
}

void add_store_command(CLI::App& app) {
  auto port = std::make_shared<int>(29500);
  auto bind = std::make_shared<std::string>("127.0.0.1");
  CLI::App* cmd = app.add_subcommand(
      "store", "Serve a rendezvous store until interrupted (point MASTER_ADDR/MASTER_PORT at it)");
  cmd->add_option("--port", *port, "TCP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--bind", *bind,
                  "IPv4 address to listen on (0.0.0.0: every interface, for ranks on other hosts)")
      ->capture_default_str();
  cmd->callback([port, bind] {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    const auto secret = control::store_secret_from_environment();
    TcpStoreOptions options;
    options.secret = secret.value_or("");
    TcpStoreServer server(*bind, static_cast<std::uint16_t>(*port), options);
    std::cout << fmt::format("tpcomm store: listening on {}:{} {} (Ctrl-C to stop)", *bind,
                             server.port(),
                             secret ? "(ranks must prove TPCOMM_STORE_SECRET)"
                                    : "WITHOUT a secret: any process that reaches it can join a "
                                      "group; set TPCOMM_STORE_SECRET (docs/store.md)")
              << std::endl;
    int sig = 0;
    sigwait(&mask, &sig);
    std::cout << fmt::format("tpcomm store: stopping ({} keys held)", server.key_count())
              << std::endl;
  });
}

}  // namespace tpcomm::cli
