// tpcomm store: a rendezvous store of its own, served until interrupted, that ranks reach through
// MASTER_ADDR/MASTER_PORT (docs/store.md).
#include <signal.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "control/store_auth.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm::cli {

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
