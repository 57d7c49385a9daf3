// The generic delta driver, in the shape of llvm-reduce's: a pass only says how many targets a
// graph has and how to build the graph with a range of them removed; the driver owns chunking
// (largest power of two first, halving when a sweep removes nothing), validation (every
// candidate is lint()ed; invalid ones, and ones left without an op, are skipped, not tested), parallel testing (`jobs`
// candidates at once, the first interesting one in order wins) and checkpointing.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "minifier/interesting.h"
#include "repro/graph.h"

namespace parity::minifier {

struct DeltaPass {
  std::string name;
  std::string description;
  std::function<int(const ir::Graph&)> count;
  // The candidate with targets [begin, end) removed; nullopt when not expressible.
  std::function<std::optional<ir::Graph>(const ir::Graph&, int begin, int end)> remove;
};

struct PassStats {
  std::string pass;
  int candidates = 0, invalid = 0, accepted = 0;
};

// Runs `pass` to a fixed point. `on_accept` sees every accepted graph (to checkpoint it).
ir::Graph RunDeltaPass(const DeltaPass& pass, ir::Graph current, Interestingness& test, int jobs,
                       const std::function<void(const ir::Graph&)>& on_accept, PassStats& stats);

// Every pass in order, again and again until a round accepts nothing. Appends each pass run's
// stats to `stats` and a line per accepting pass to `log`.
ir::Graph RunPassesToFixedPoint(ir::Graph current, Interestingness& test, int jobs,
                                const std::function<void(const ir::Graph&)>& on_accept, nlohmann::json& stats, std::ostream& log);

// The passes, in the order the pipeline runs them (minifier/passes/*.cpp).
const std::vector<DeltaPass>& DeltaPasses();

// Canonical clean-up shared by passes: dead code and unused placeholders removed.
ir::Graph Cleaned(ir::Graph g);

}  // namespace parity::minifier
