// parity import SCRIPT --out DIR: PyTorch's own repro scripts (an after_aot repro.py or
// minifier_launcher.py, tlparse's fx_graph_runnable.py) as repro dirs. The script is the user's
// code: it runs in a Python child of its own (parity_capture.import_repro), as capture runs a
// program, never in parity or its worker: forked from the fork server of its environment when
// this process keeps workers (runtime/python_run.h: torch, dynamo and Inductor imported once), else
// a fresh interpreter.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "runtime/python_run.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace parity::cli {

namespace {

struct ImportArgs {
  std::string script, out, save_dir, device, name;
  int timeout_s = 1800;
};

namespace fs = std::filesystem;

// What the child wrote to `log` since `offset` (which moves past it), copied to stderr.
void CopyNew(const fs::path& log, std::streamoff& offset) {
  std::ifstream in(log, std::ios::binary);
  if (!in || !in.seekg(offset)) return;
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset += static_cast<std::streamoff>(chunk.size());
  std::cerr << chunk << std::flush;
}

// The child's run to its end or its deadline (then killed), its output copied to stderr as it
// comes; its log (in a scratch dir of this process's) removed after.
ExitInfo RunChild(const std::vector<std::string>& args, int timeout_s) {
  const fs::path scratch = ProcessScratchDir("parity-import-");
  fs::create_directories(scratch);
  const fs::path log = scratch / "import.log";
  std::ofstream(log).close();
  runtime::PythonRun child = Unwrap(runtime::PythonRun::Start("import_repro", args, {}, log.string()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::streamoff offset = 0;
  std::optional<ExitInfo> how;
  while (!(how = child.Poll())) {
    CopyNew(log, offset);
    if (std::chrono::steady_clock::now() > deadline) {
      how = child.Wait(std::chrono::milliseconds(0));  // kills it: timed out
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CopyNew(log, offset);
  RemoveAll(scratch);
  return *how;
}

// The dir's path on stdout with it written; a script that is not such a repro, does not run or
// cannot be captured is bad input (exit 2) naming it and how its import ended (its own error
// above, on stderr).
int RunImport(const ImportArgs& a) {
  std::vector<std::string> args{a.script, "--out", a.out};
  for (const auto& [flag, value] : {std::pair{"--save-dir", a.save_dir}, {"--device", a.device}, {"--name", a.name}})
    if (!value.empty()) args.insert(args.end(), {flag, value});
  const ExitInfo e = RunChild(args, a.timeout_s);
  if (e.exited && e.code == 0) {
    std::cout << a.out << "\n";
    return 0;
  }
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
