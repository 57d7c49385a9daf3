// One rank of a multi-rank dir as a plain repro dir: each of the rank's graphs with its collective
// nodes cut out, what they returned on that rank fed in as placeholders. The values come from a
// simulated eager replay of every rank (simulated.h), so the isolated dir needs no process group:
// it runs, verifies and minifies like any repro dir. A failure that survives the isolation is in
// the rank's own computation, and its minimum holds no collective; one that does not needs the
// collectives themselves (docs/distributed.md, "Minify").
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>

#include "distributed/world.h"
#include "util/status.h"

namespace parity::distributed {

struct IsolatedRank {
  int rank = 0;
  std::filesystem::path dir;
  int collectives_cut = 0;  // collective nodes (wait_tensor included) cut from its graphs
};

// Each rank's values of a simulated eager replay of every rank (simulated.h): per rank, per graph
// (in order), node name -> value. `every_node`: all nodes' values; else only the collectives'
// boundary (what they read and returned: what IsolateRanks cuts at). BadInput naming the rank
// when a rank's run fails.
using ReplayValues = std::vector<std::vector<std::unordered_map<std::string, c10::IValue>>>;
[[nodiscard]] Expected<ReplayValues> SimulatedValues(const World& world, const std::string& device,
                                                     std::chrono::milliseconds timeout, bool every_node);

// Writes `out/rank<r>` for every rank (replaced if there), in rank order. The replay runs on
// `device`; `timeout`: how long a collective waits for its members. BadInput when a rank's graph
// holds a collective inside a subgraph (a higher-order op's body: not cut here) or a rank's run
// fails (naming the rank).
[[nodiscard]] Expected<std::vector<IsolatedRank>> IsolateRanks(const World& world, const std::string& device,
                                                               std::chrono::milliseconds timeout,
                                                               const std::filesystem::path& out);

}  // namespace parity::distributed
