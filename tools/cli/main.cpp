// tpcomm: the command-line tool. Exit status 0 on success, 2 for invalid input or usage,
// 1 for an internal or environment failure.
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "launcher/mpirun_over_nodes.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/version.hpp"

int main(int argc, char** argv) {
  // mpirun's remote-shell agent takes mpirun's command line as it comes: no option parsing.
  if (argc > 1 && std::string(argv[1]) == "node-agent") {
    return tpcomm::cli::run_node_agent(argc, argv);
  }
  CLI::App app{"tpcomm: tensor-parallel collectives that choose their own safe, fast path",
               "tpcomm"};
  app.set_version_flag("--version", fmt::format("tpcomm {}\nCUDA backends in this build: {}",
                                                tpcomm::kVersion, tpcomm::kCudaBuildStatus));
  app.require_subcommand(1);
  int exit_status = 0;
  tpcomm::cli::add_plan_command(app);
  tpcomm::cli::add_topo_command(app);
  tpcomm::cli::add_env_command(app, exit_status);
  tpcomm::cli::add_run_command(app, exit_status);
  tpcomm::cli::add_store_command(app);
  tpcomm::cli::add_bench_command(app, exit_status);
  tpcomm::cli::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, version or the usage error
    return code == 0 ? 0 : 2;
  } catch (const tpcomm::Error& e) {
    std::cerr << fmt::format("tpcomm: error: {}\n", e.what());
    return e.code() == tpcomm::ErrorCode::kInvalidInput ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("tpcomm: internal error: {} (please report this)\n", e.what());
    return 1;
  }
  return exit_status;
}
