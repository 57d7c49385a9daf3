// parity workers [--stop] [--json]: the Python workers kept warm across runs (--keep-workers,
// runtime/worker_pool.h): which are there, which a parity process uses now, and the fork servers new
// ones come from (runtime/fork_server.h); --stop ends the idle ones and the servers.
#include <iostream>

#include "cli/commands.h"
#include "runtime/fork_server.h"
#include "runtime/worker_pool.h"

namespace parity::cli {

namespace {
int RunWorkers(bool stop, bool as_json) {
  if (stop) {
    const int n = Unwrap(runtime::StopPool());
    std::cout << "stopped " << n << " idle worker" << (n == 1 ? "" : "s") << "\n";
    return 0;
  }
  const auto workers = Unwrap(runtime::ListPool());
  if (as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& w : workers)
      out.push_back({{"key", w.key}, {"index", w.index}, {"pid", w.pid}, {"live", w.live}, {"in_use", w.in_use},
                     {"keep_idle_s", w.keep_idle_s}, {"launches", w.launches}, {"started", w.started}, {"cwd", w.cwd}, {"python", w.python}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  const auto dir = Unwrap(runtime::PoolDir(false));
  if (workers.empty()) std::cout << "no kept workers in " << dir.string() << "\n";
  for (const auto& w : workers)
    std::printf("%s-%d pid %-8d %-7s keep %ds  started %s  cwd %s\n", w.key.c_str(), w.index, static_cast<int>(w.pid),
                !w.live ? "ended" : w.in_use ? "in use" : "idle", w.keep_idle_s, w.started.c_str(), w.cwd.c_str());
  for (const auto& [key, pid] : runtime::ListForkServers(dir))  // what new workers are forked from
    std::printf("%s-fs pid %-8d fork server\n", key.c_str(), static_cast<int>(pid));
  return 0;
}
}  // namespace

void set_workers_command(CLI::App& app, int& exit_code) {
  auto stop = std::make_shared<bool>(false), as_json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("workers", "List the Python workers kept warm across runs (--keep-workers)");
  cmd->add_flag("--stop", *stop, "end every kept worker no parity process is using");
  cmd->add_flag("--json", *as_json, "print as JSON");
  cmd->callback([stop, as_json, &exit_code] { exit_code = RunWorkers(*stop, *as_json); });
}

}  // namespace parity::cli
