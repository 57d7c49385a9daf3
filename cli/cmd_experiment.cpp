// parity _experiment --dir DIR | --serve SOCKET: the hidden entry of an isolated experiment child,
// or of a job server running a slot's experiments one after another (runtime/jobs.h owns both
// ends of the protocol, experiment/runner.h the experiment it runs).
#include "cli/commands.h"
#include "experiment/runner.h"

namespace parity::cli {

void set_experiment_command(CLI::App& app, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  auto serve = std::make_shared<std::string>();
  CLI::App* exp = app.add_subcommand(runtime::kJobCommand, "(internal) run one experiment in this process");
  exp->group("");  // hidden from --help
  auto* d = exp->add_option("--dir", *dir);
  exp->add_option("--serve", *serve)->excludes(d);
  exp->callback([dir, serve, &exit_code] {
    exit_code = serve->empty() ? experiment::ExperimentChildMain(*dir) : experiment::ExperimentServerMain(*serve);
  });
}

}  // namespace parity::cli
