#include <algorithm>
#include <ostream>

#include "minifier/passes/passes.h"
#include "minifier/steps/steps.h"

namespace parity::minifier {

Status InlineSubgraphsStep(StepContext& ctx, ReductionState& state, Interestingness& test) {
  std::vector<std::string> left = InlinableSubgraphCalls(*state.current);
  if (left.empty()) return Status::Ok();
  std::vector<std::string> inlined, kept;
  while (!left.empty()) {
    // All at once first (one run); else each alone, in one batch: the first that keeps the failure.
    std::vector<ir::Graph> cands;
    std::vector<std::vector<std::string>> which;
    if (auto all = InlineSubgraphs(*state.current, {left.begin(), left.end()})) {
      cands.push_back(std::move(*all));
      which.push_back(left);
    }
    if (left.size() > 1)
      for (const auto& call : left)
        if (auto one = InlineSubgraphs(*state.current, {call})) {
          cands.push_back(std::move(*one));
          which.push_back({call});
        }
    std::vector<const ir::Graph*> ptrs;
    for (const auto& c : cands) ptrs.push_back(&c);
    const std::vector<bool> verdicts = ptrs.empty() ? std::vector<bool>{} : test.Test(ptrs);
    auto hit = std::find(verdicts.begin(), verdicts.end(), true);
    if (hit == verdicts.end()) {
      kept.insert(kept.end(), left.begin(), left.end());
      break;
    }
    const size_t k = static_cast<size_t>(hit - verdicts.begin());
    state.current = std::move(cands[k]);
    inlined.insert(inlined.end(), which[k].begin(), which[k].end());
    left = InlinableSubgraphCalls(*state.current);  // what the inlined calls held comes up too
    for (const auto& done : inlined) left.erase(std::remove(left.begin(), left.end(), done), left.end());
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "%" : ", %") + x;
    return s;
  };
  if (!inlined.empty()) ctx.log << "inlined " << list(inlined) << ": the failure does not need the call, its ops are in the graph\n";
  if (!kept.empty()) ctx.log << "kept " << list(kept) << ": inlined, the graph no longer fails the same way\n";
  state.inlined = inlined;
  return Status::Ok();
}

}  // namespace parity::minifier
