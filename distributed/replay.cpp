#include "distributed/replay.h"

#include <optional>
#include <thread>

#include "distributed/simulated.h"

namespace parity::distributed {

nlohmann::json WorldReport::ToJson() const {
  nlohmann::json j = {{"pass", pass}, {"world_size", world_size}, {"replay", mode}, {"ranks", nlohmann::json::array()}};
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
  out += std::string(pass ? "PASS" : "FAIL") + ": " + std::to_string(world_size) + " ranks, " + mode + " replay\n";
  return out;
}

Expected<WorldReport> RunSimulated(const World& world, const verify::RunReproOptions& options, std::chrono::milliseconds timeout) {
  const int n = world.world_size();
  SimulatedWorld sim(n, world.groups(), timeout);
  std::vector<std::optional<Expected<verify::ReproRunReport>>> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      verify::RunReproOptions mine = options;
      mine.collectives = sim.Rank(r);
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

}  // namespace parity::distributed
