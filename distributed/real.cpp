#include "distributed/real.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <thread>

#include "runtime/python_run.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace parity::distributed {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Every path in it absolute: the rank's process may start elsewhere (a fork server's fork), and
// the store is a file:// URL, whose first component a relative path would give as the host (a
// `--out m` minify's ranks then waited for a store nobody could create).
json Request(const World& world, const RealRun& run, int r) {
  const ReproDir& dir = world.rank(r);
  const fs::path scratch = fs::absolute(run.scratch);
  json graphs = json::array();
  for (const auto& g : dir.graphs()) graphs.push_back(g.name);
  json groups = json::object();
  for (const auto& [name, members] : world.groups()) groups[name] = members;
  json request = {{"repro", fs::absolute(dir.root()).string()},
          {"graphs", graphs},
          {"rank", r},
          {"world_size", world.world_size()},
          {"groups", groups},
          {"store", (scratch / "store").string()},
          {"backend", run.backend},
          {"options", run.options},
          {"device", run.device},
          // The group's own collective timeout: a rank left waiting in a collective fails naming it,
          // before parity's deadline (twice as long) ends every rank.
          {"timeout_s", std::chrono::duration<double>(run.timeout).count()},
          {"out", (scratch / ("rank" + std::to_string(r) + ".safetensors")).string()},
          {"ready", (scratch / ("rank" + std::to_string(r) + ".ready")).string()}};
  if (!run.compiler_bisect.is_null()) {
    request["compiler_bisect"] = run.compiler_bisect;
    request["bisect_out"] = (scratch / "bisect.json").string();
  }
  return request;
}

std::string LogTail(const fs::path& log) {
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 1500 ? "..." + text.substr(text.size() - 1500) : text;
}

}  // namespace

Expected<std::vector<fs::path>> RunReal(const World& world, const RealRun& run) {
  fs::create_directories(run.scratch);
  fs::remove(run.scratch / "store");
  const int n = world.world_size();
  std::vector<runtime::PythonRun> children;
  std::vector<fs::path> outs, logs;
  for (int r = 0; r < n; ++r) {
    const json req = Request(world, run, r);
    const fs::path req_path = run.scratch / ("rank" + std::to_string(r) + ".json");
    PARITY_RETURN_IF_ERROR(WriteFileAtomic(req_path, req.dump(1)));
    outs.emplace_back(req["out"].get<std::string>());
    logs.push_back(run.scratch / ("rank" + std::to_string(r) + ".log"));
    PARITY_ASSIGN_OR_RETURN(runtime::PythonRun child, runtime::PythonRun::Start("rank_replay", {req_path.string()}, {}, logs.back().string()));
    children.push_back(std::move(child));
  }
  // Every rank against one deadline, counted from when all have started (joined the group: a
  // loaded machine's Python start-up is not a hang); the first to fail ends the others (they
  // would wait on it). Starting has a deadline of its own.
  const auto started = std::chrono::steady_clock::now();
  const auto start_limit = std::max(run.timeout, std::chrono::milliseconds(300000));
  std::optional<std::chrono::steady_clock::time_point> all_ready;
  auto deadline = started + start_limit;
  std::vector<std::optional<ExitInfo>> ended(static_cast<size_t>(n));
  std::string failed;
  for (size_t done = 0; done < static_cast<size_t>(n);) {
    for (int r = 0; r < n; ++r) {
      auto& e = ended[static_cast<size_t>(r)];
      if (e) continue;
      e = children[static_cast<size_t>(r)].Poll();
      if (!e) continue;
      ++done;
      if (!(e->exited && e->code == 0) && failed.empty())
        failed = "rank " + std::to_string(r) + "'s process ended (" + e->Describe() + "):\n" + LogTail(logs[static_cast<size_t>(r)]);
    }
    if (done == static_cast<size_t>(n)) break;
    if (!all_ready) {
      bool ready = true;
      for (int r = 0; r < n; ++r) ready = ready && fs::exists(run.scratch / ("rank" + std::to_string(r) + ".ready"));
      if (ready) all_ready = std::chrono::steady_clock::now(), deadline = *all_ready + 2 * run.timeout;
    }
    if (!failed.empty() || std::chrono::steady_clock::now() > deadline) {
      std::string waiting, where_others;
      for (int r = 0; r < n; ++r)
        if (!ended[static_cast<size_t>(r)]) {
          children[static_cast<size_t>(r)].Kill();
          waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
          where_others += "\nrank " + std::to_string(r) + ", ended with it, was at:\n" + LogTail(logs[static_cast<size_t>(r)]);
        }
      if (failed.empty())
      {
        std::string where;
        for (int r = 0; r < n; ++r)
          if (!ended[static_cast<size_t>(r)]) where += "\n" + LogTail(logs[static_cast<size_t>(r)]);
        if (!all_ready)
          return Error::Runtime("rank " + waiting + " did not start (join the group) within " +
                                std::to_string(start_limit.count() / 1000) + " s; where each was:" + where);
        return Error::Runtime("timeout after " + std::to_string(2 * run.timeout.count() / 1000) + " s: rank " + waiting +
                              " still running (a hang, or a collective a rank never joined); where each was:" + where);
      }
      return Error::Runtime(failed + where_others);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!failed.empty()) return Error::Runtime(failed);
  return outs;
}

}  // namespace parity::distributed
