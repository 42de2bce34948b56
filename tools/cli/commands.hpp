// The tpcomm subcommands. Each registers its options on the app and runs from its callback;
// errors are thrown as tpcomm::Error and turned into exit statuses by main.
#pragma once

#include <CLI/CLI.hpp>

namespace tpcomm::cli {

void add_plan_command(CLI::App& app);
void add_topo_command(CLI::App& app);
void add_env_command(CLI::App& app, int& exit_status);
void add_run_command(CLI::App& app, int& exit_status);
void add_store_command(CLI::App& app);
void add_bench_command(CLI::App& app, int& exit_status);
void add_tune_command(CLI::App& app);

}  // namespace tpcomm::cli
