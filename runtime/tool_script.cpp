#include "runtime/tool_script.h"

#include <chrono>

#include "runtime/job_dir.h"
#include "runtime/worker.h"
#include "util/subprocess.h"

namespace parity::runtime {
namespace fs = std::filesystem;

Status RunToolScript(const std::string& name, const std::vector<std::string>& args, const fs::path& log, int timeout_s) {
  const fs::path script = fs::path(PARITY_TOOLS_DIR) / "parity_capture" / (name + ".py");
  std::error_code ec;
  fs::remove(log, ec);
  SpawnOptions so;
  so.stdout_path = log.string();
  so.stderr_path = log.string();
  so.env = {"PYTHONUNBUFFERED=1"};
  std::vector<std::string> argv{WorkerPython(), script.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = Child::Spawn(argv, so);
  if (!child.ok()) return child.error();
  const ExitInfo how = child->Wait(std::chrono::seconds(timeout_s));
  if (how.exited && how.code == 0) {
    fs::remove(log, ec);  // kept only when it says why the script failed
    return Status::Ok();
  }
  return Error::Runtime(script.string() + " ended (" + how.Describe() + "): " + job_dir::Tail(log, 600));
}

}  // namespace parity::runtime
