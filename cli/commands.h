// One file per subcommand: set_<name>_command declares its options and binds a callback that
// calls a plain run function. Callbacks report a verdict through `exit_code` (0 pass, 1 fail)
// and throw parity::Failure for errors; main() maps those to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include "util/status.h"

namespace parity::cli {

void set_repro_command(CLI::App& app, int& exit_code);
void set_compare_command(CLI::App& app, int& exit_code);
void set_verify_command(CLI::App& app, int& exit_code);
void set_backends_command(CLI::App& app, int& exit_code);
void set_models_command(CLI::App& app, int& exit_code);
void set_minify_command(CLI::App& app, int& exit_code);
void set_experiment_command(CLI::App& app, int& exit_code);
void set_ci_command(CLI::App& app, int& exit_code);
void set_merge_command(CLI::App& app, int& exit_code);
void set_report_command(CLI::App& app, int& exit_code);
void set_profile_command(CLI::App& app, int& exit_code);
void set_workers_command(CLI::App& app, int& exit_code);
void set_import_command(CLI::App& app, int& exit_code);

// The zygote the job children of this process are forked from (util/zygote.h; main.cpp says with
// what entry and environment), started by a command whose experiments run as job children
// (AddExperimentOptions) as the command is found, before anything else ran.
void StartJobZygote();

// Throws Failure when `e` holds an error, else returns the value.
template <typename T>
T Unwrap(Expected<T> e) {
  if (!e.ok()) throw Failure{e.error()};
  return std::move(e).value();
}

// Throws Failure when `s` holds an error.
inline void Unwrap(const Status& s) {
  if (!s.ok()) throw Failure{s.error()};
}

}  // namespace parity::cli
