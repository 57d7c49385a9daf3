// parity models [--json]: the model suite (defined in tools/parity_capture/models.py).
#include <iostream>

#include "cli/commands.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"

namespace parity::cli {

namespace {
int RunModels(bool as_json) {
  auto resp = Unwrap(runtime::AskWorker(runtime::requests::ListModels()));
  if (as_json) {
    std::cout << resp["models"].dump(2) << "\n";
    return 0;
  }
  for (const auto& m : resp["models"])
    std::printf("%-10s %-18s bs=%-3d %s\n", m["name"].get<std::string>().c_str(), m["suite"].get<std::string>().c_str(),
                m["batch_size"].get<int>(), m["description"].get<std::string>().c_str());
  return 0;
}
}  // namespace

void set_models_command(CLI::App& app, int& exit_code) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("models", "List the model suite");
  cmd->add_flag("--json", *as_json, "print as JSON");
  cmd->callback([as_json, &exit_code] { exit_code = RunModels(*as_json); });
}

}  // namespace parity::cli
