// parity _experiment --dir DIR: the hidden entry of an isolated experiment child
// (runtime/jobs.h owns both ends of the protocol, verifier/runner.h the experiment it runs).
#include "cli/commands.h"
#include "verifier/runner.h"

namespace parity::cli {

void set_experiment_command(CLI::App& app, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  CLI::App* exp = app.add_subcommand(runtime::kJobCommand, "(internal) run one experiment in this process");
  exp->group("");  // hidden from --help
  exp->add_option("--dir", *dir)->required();
  exp->callback([dir, &exit_code] { exit_code = verifier::ExperimentChildMain(*dir); });
}

}  // namespace parity::cli
