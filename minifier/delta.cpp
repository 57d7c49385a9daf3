#include "minifier/delta.h"

#include <ostream>

#include "minifier/passes/passes.h"

namespace parity::minifier {

ir::Graph Cleaned(ir::Graph g) {
  g.EliminateDeadCode();
  g.RemoveUnusedPlaceholders();
  return g;
}

const std::vector<DeltaPass>& DeltaPasses() {
  static const std::vector<DeltaPass> passes = {
#define PARITY_DELTA_PASS(NAME, FACTORY) FACTORY(),
#include "minifier/passes/passes.def"
#undef PARITY_DELTA_PASS
  };
  return passes;
}

ir::Graph RunDeltaPass(const DeltaPass& pass, ir::Graph current, Interestingness& test, int jobs,
                       const std::function<void(const ir::Graph&)>& on_accept, PassStats& stats) {
  stats.pass = pass.name;
  int targets = pass.count(current);
  int chunk = 1;
  while (chunk * 2 <= targets) chunk *= 2;
  while (chunk >= 1 && targets > 0) {
    bool progress = false;
    int begin = 0;
    while (begin < targets) {
      // Up to `jobs` windows at once; the earliest interesting one is taken.
      std::vector<ir::Graph> cands;
      std::vector<int> starts;
      for (int b = begin; b < targets && static_cast<int>(cands.size()) < jobs; b += chunk) {
        auto c = pass.remove(current, b, std::min(targets, b + chunk));
        ++stats.candidates;
        // A candidate without ops cannot show an op's bug: never worth a run.
        if (!c || c->ops().empty() || !c->Lint().ok()) {
          ++stats.invalid;
          continue;
        }
        cands.push_back(std::move(*c));
        starts.push_back(b);
      }
      if (cands.empty()) {
        begin += chunk * jobs;
        continue;
      }
      std::vector<const ir::Graph*> ptrs;
      for (auto& c : cands) ptrs.push_back(&c);
      auto ok = test.Test(ptrs);
      int winner = -1;
      for (size_t k = 0; k < ok.size(); ++k)
        if (ok[k]) {
          winner = static_cast<int>(k);
          break;
        }
      if (winner >= 0) {
        current = std::move(cands[winner]);
        ++stats.accepted;
        progress = true;
        on_accept(current);
        targets = pass.count(current);
        begin = starts[winner];  // the window now holds what followed the removed one
      } else {
        begin = starts.back() + chunk;
      }
    }
    if (!progress) chunk /= 2;
  }
  return current;
}

ir::Graph RunPassesToFixedPoint(ir::Graph current, Interestingness& test, int jobs,
                                const std::function<void(const ir::Graph&)>& on_accept, nlohmann::json& stats,
                                std::ostream& log) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& pass : DeltaPasses()) {
      PassStats st;
      current = RunDeltaPass(pass, std::move(current), test, jobs, on_accept, st);
      if (st.accepted) {
        changed = true;
        log << "  " << pass.name << ": " << st.accepted << " accepted of " << st.candidates << " candidates, now "
            << current.ops().size() << " ops\n";
      }
      stats.push_back({{"pass", st.pass}, {"candidates", st.candidates}, {"invalid", st.invalid}, {"accepted", st.accepted}});
    }
  }
  return current;
}

}  // namespace parity::minifier
