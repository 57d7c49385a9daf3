// parity import SCRIPT --out DIR: PyTorch's own repro scripts (an after_aot repro.py or
// minifier_launcher.py, tlparse's fx_graph_runnable.py) as repro dirs. The script is the user's
// code: it runs in a Python child of its own (parity_capture.import_repro), as capture runs a
// program, never in parity or its worker.
#include <iostream>

#include "cli/commands.h"
#include "runtime/python_env.h"
#include "runtime/worker.h"
#include "util/subprocess.h"

namespace parity::cli {

namespace {

struct ImportArgs {
  std::string script, out, save_dir, device, name;
  int timeout_s = 1800;
};

// 0 with the dir written; a script that is not such a repro, does not run or cannot be captured
// is bad input (exit 2) naming it and how its import ended (its own error above, on stderr).
int RunImport(const ImportArgs& a) {
  std::vector<std::string> argv = runtime::PackageModuleCommand(runtime::WorkerPython(), "import_repro");
  argv.insert(argv.end(), {a.script, "--out", a.out});
  for (const auto& [flag, value] : {std::pair{"--save-dir", a.save_dir}, {"--device", a.device}, {"--name", a.name}})
    if (!value.empty()) argv.insert(argv.end(), {flag, value});
  SpawnOptions so;
  so.env = runtime::PythonEnv();
  Child child = Unwrap(Child::Spawn(argv, so));
  const ExitInfo e = child.Wait(std::chrono::seconds(a.timeout_s));
  if (e.exited && e.code == 0) return 0;
  throw Failure{Error::BadInput(a.script + ": not imported (its import ended: " + e.Describe() +
                                "); an after_aot repro.py, minifier_launcher.py or fx_graph_runnable.py is imported")};
}

}  // namespace

void set_import_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Make a repro dir of PyTorch's repro script (after_aot repro.py, minifier_launcher.py, fx_graph_runnable.py)");
  cmd->add_option("script", a->script, "the script")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "the repro dir to write")->required();
  cmd->add_option("--save-dir", a->save_dir, "where its inputs' storages are (default: the save_dir its run_repro call names)");
  cmd->add_option("--device", a->device, "run and capture on this device (default: the inputs' own)");
  cmd->add_option("--name", a->name, "the model name the dir records (default: the script's file name)");
  cmd->add_option("--timeout", a->timeout_s, "seconds the import may take")->check(CLI::PositiveNumber);
  cmd->callback([a, &exit_code] { exit_code = RunImport(*a); });
}

}  // namespace parity::cli
