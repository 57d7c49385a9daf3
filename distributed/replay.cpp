#include "distributed/replay.h"

#include <optional>
#include <thread>

#include "distributed/simulated.h"
#include "experiment/backend.h"
#include "experiment/case.h"
#include "experiment/devices.h"
#include "repro/safetensors.h"

namespace parity::distributed {

nlohmann::json WorldReport::ToJson() const {
  nlohmann::json j = {{"pass", pass}, {"world_size", world_size}, {"replay", mode}, {"backend", backend},
                      {"ranks", nlohmann::json::array()}};
  if (!error.empty()) j["error"] = error;
  for (const auto& r : ranks) {
    nlohmann::json one = r.report.ToJson();
    one["rank"] = r.rank;
    j["ranks"].push_back(std::move(one));
  }
  return j;
}

std::string WorldReport::ToText() const {
  std::string out;
  for (const auto& r : ranks) out += "== rank " + std::to_string(r.rank) + "\n" + r.report.ToText();
  if (!error.empty()) out += "ERROR: " + error + "\n";
  out += std::string(pass ? "PASS" : "FAIL") + ": " + std::to_string(world_size) + " ranks, " + mode + " replay" +
         (backend == "eager" ? "" : " of " + backend) + "\n";
  return out;
}

namespace {

// Every rank's RunRepro in a thread of its own, the collectives simulated; `under_test(r)`, when
// given, the outputs rank r's run judges instead of its eager run's.
using UnderTestOf = std::function<std::function<Expected<std::vector<at::Tensor>>(size_t)>(int rank)>;

Expected<WorldReport> RunRanks(const World& world, const verify::RunReproOptions& options, std::chrono::milliseconds timeout,
                               const UnderTestOf& under_test) {
  const int n = world.world_size();
  SimulatedWorld sim(n, world.groups(), timeout);
  std::vector<std::optional<Expected<verify::ReproRunReport>>> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      verify::RunReproOptions mine = options;
      mine.collectives = sim.Rank(r);
      if (under_test) mine.under_test = under_test(r);
      results[static_cast<size_t>(r)].emplace(verify::RunRepro(world.rank(r), mine));
      sim.Finished(r);
    });
  }
  for (auto& t : threads) t.join();
  WorldReport report;
  report.world_size = n;
  for (int r = 0; r < n; ++r) {
    auto& res = *results[static_cast<size_t>(r)];
    if (!res.ok()) return res.error().With("rank " + std::to_string(r));
    report.pass = report.pass && res->pass;
    report.ranks.push_back({r, std::move(*res)});
  }
  return report;
}

}  // namespace

Expected<WorldReport> RunSimulated(const World& world, const verify::RunReproOptions& options, std::chrono::milliseconds timeout) {
  return RunRanks(world, options, timeout, nullptr);
}

Expected<WorldReport> RunWithBackend(const World& world, const verify::RunReproOptions& options, const RealRun& run) {
  auto files = RunReal(world, run);
  if (!files.ok()) {
    if (files.error().kind != ErrorKind::kRuntime) return files.error();
    WorldReport failed;
    failed.pass = false;
    failed.world_size = world.world_size();
    failed.mode = "real";
    failed.backend = run.backend;
    failed.error = files.error().message;
    return failed;
  }
  const std::vector<std::filesystem::path> outs = *files;
  UnderTestOf under_test = [&world, outs](int r) {
    return [&world, path = outs[static_cast<size_t>(r)], r](size_t g) -> Expected<std::vector<at::Tensor>> {
      PARITY_ASSIGN_OR_RETURN(safetensors::File f, safetensors::File::Open(path));
      std::vector<at::Tensor> got;
      for (size_t k = 0; k < world.rank(r).graphs()[g].expected_outputs.size(); ++k) {
        auto t = f.Get("g" + std::to_string(g) + "/output/" + std::to_string(k));
        if (!t.ok()) return Error::Runtime("rank " + std::to_string(r) + ": the backend's run left no output " + std::to_string(k) + " of graph " + std::to_string(g));
        got.push_back(*t);
      }
      return got;
    };
  };
  PARITY_ASSIGN_OR_RETURN(WorldReport report, RunRanks(world, options, run.timeout, under_test));
  report.mode = "real";
  report.backend = run.backend;
  return report;
}

Expected<RealRun> RealRunOf(const std::string& backend, const nlohmann::json& options, const std::string& device,
                            std::chrono::milliseconds timeout) {
  PARITY_ASSIGN_OR_RETURN(experiment::BackendInfo info, experiment::FindBackend(backend));
  if (info.dynamo.empty())
    return Error::Unsupported("backend " + backend + ": a multi-rank dir's ranks run for real as torch.compile runs them; this "
                              "backend has no torch.compile backend (inductor, aot_eager and torch_compile:<name> have)");
  RealRun run;
  run.backend = info.dynamo;
  if (!options.is_null()) run.options = options;
  run.device = device;
  run.timeout = timeout;
  return run;
}

Expected<verify::RunReproOptions> JudgeOptions(const World& world, const experiment::ExperimentOptions& o) {
  const Manifest& m = world.rank(0).manifest();
  verify::RunReproOptions ro;
  const std::string device = o.device.value_or(m.device);
  if (std::string why = experiment::DeviceUnavailable(device); !why.empty())
    return Error::BadInput((world.rank(0).root() / "manifest.json").string() + ": field \"device\" is \"" + device + "\": " + why +
                           "; pass --device cpu to run it on the CPU");
  ro.device = c10::Device(device);
  ro.same.tol = o.tol.value_or(experiment::DefaultTolerance(m.suite, m.mode, m.dtype));
  ro.same.cos_similarity = o.cosine;
  ro.while_limit = o.while_limit;
  return ro;
}

}  // namespace parity::distributed
