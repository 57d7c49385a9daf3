#include <algorithm>
#include <ostream>
#include <set>

#include "minifier/steps/steps.h"

namespace parity::minifier {

std::optional<ir::Graph> CulpritAlone(const ir::Graph& g, const ir::Node& culprit) {
  std::set<std::string> keep{culprit.name()};
  for (const ir::Node* in : culprit.Inputs())
    if (in->kind() == ir::NodeKind::kGetAttr) keep.insert(in->name());
  auto alone = g.Extract(keep, {culprit.name()});
  if (!alone.ok() || !alone->Lint().ok()) return std::nullopt;
  return std::move(*alone);
}

std::optional<ir::Graph> SinksPrefix(const ir::Graph& g, size_t node_index) {
  // A tuple-valued op's elements are its getitem nodes, which follow it: they belong to the
  // prefix, or its values (batch norm's output, say) would be no sink and drop out of the test.
  while (node_index + 1 < g.size() && g.at(node_index + 1)->kind() == ir::NodeKind::kCallFunction &&
         g.at(node_index + 1)->target() == ir::kGetItem && g.at(node_index + 1)->args[0].node->index() <= node_index)
    ++node_index;
  std::set<const ir::Node*> read;
  for (const ir::Node* n : g.nodes())
    if (n->index() <= node_index)
      for (const ir::Node* in : n->Inputs()) read.insert(in);
  std::vector<std::string> outs;
  for (const ir::Node* n : g.nodes()) {
    if (n->index() > node_index || n->kind() != ir::NodeKind::kCallFunction || read.count(n)) continue;
    // Only single tensor values: a tuple's getitem nodes come later; an effect-only op has none.
    if (n->meta.size() != 1 || !n->meta[0] || n->HasSideEffects()) continue;
    outs.push_back(n->name());
  }
  if (outs.empty()) return std::nullopt;
  auto p = g.Prefix(node_index, outs);
  if (!p.ok()) return std::nullopt;
  return std::move(*p);
}

namespace {

// The culprit on the prefix's path to it, returning it alone (the prefix's other values dropped).
std::optional<ir::Graph> CulpritOnItsPath(const ir::Graph& g, const ir::Node& culprit) {
  auto p = g.Prefix(culprit.index(), {culprit.name()});
  if (!p.ok()) return std::nullopt;
  return std::move(*p);
}

// One round: up to `jobs` probes between lo and hi; returns the narrowed [lo, hi].
std::pair<size_t, size_t> Narrow(const ir::Graph& g, const std::vector<ir::Node*>& ops, size_t lo, size_t hi, int jobs,
                                 Interestingness& test) {
  const size_t k = std::min<size_t>(static_cast<size_t>(std::max(1, jobs)), hi - lo);
  std::vector<size_t> probes;
  for (size_t i = 1; i <= k; ++i) probes.push_back(lo + (hi - lo) * i / (k + 1));
  probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
  std::vector<ir::Graph> cands;
  std::vector<size_t> where;
  for (size_t p : probes)
    if (auto c = SinksPrefix(g, ops[p]->index())) {
      cands.push_back(std::move(*c));
      where.push_back(p);
    }
  std::vector<const ir::Graph*> ptrs;
  for (const auto& c : cands) ptrs.push_back(&c);
  const auto ok = test.Test(ptrs);
  size_t new_lo = lo, new_hi = hi;
  for (size_t i = 0; i < ok.size(); ++i) {
    if (ok[i]) {
      new_hi = std::min(new_hi, where[i]);
      break;
    }
    new_lo = std::max(new_lo, where[i] + 1);
  }
  if (new_lo == lo && new_hi == hi) new_lo = lo + 1;  // no probe decided: creep
  return {std::min(new_lo, new_hi), new_hi};
}

}  // namespace

Status NodeBisect(StepContext& ctx, ReductionState& state, Interestingness& test) {
  ir::Graph& current = *state.current;
  const auto ops = current.ops();
  if (ops.empty()) return Status::Ok();
  const bool train = state.base.test == "train";
  auto full = SinksPrefix(current, ops.back()->index());
  if (!full || !test.Test({&*full})[0]) {
    ctx.log << "node bisection skipped: the graph returning all its live values does not fail the same way\n";
    return Status::Ok();
  }
  size_t lo = 0, hi = ops.size() - 1;  // invariant: prefix(hi) reproduces
  while (lo < hi) std::tie(lo, hi) = Narrow(current, ops, lo, hi, ctx.options.experiment.jobs, test);
  const ir::Node* culprit = ops[hi];
  state.culprit = NodeInfo(culprit);
  ctx.log << "node bisection: first failing node %" << culprit->name() << " (" << culprit->target() << ")"
          << (culprit->module_path.empty() ? "" : " in " + culprit->module_path) << " after " << test.runs() << " backend runs\n";
  if (!culprit->stack_trace.empty()) ctx.log << "    at " << SourceLine(*culprit) << "\n";
  // The smallest graphs that may still fail, tried at once: the culprit alone, then (train) the
  // culprit on its path from the parameters; else the failing prefix.
  std::vector<std::pair<std::string, ir::Graph>> tries;
  if (auto a = CulpritAlone(current, *culprit)) tries.emplace_back("the culprit alone on its input values", std::move(*a));
  if (auto w = train ? CulpritOnItsPath(current, *culprit) : std::nullopt)
    tries.emplace_back("the culprit on its path", std::move(*w));
  std::vector<const ir::Graph*> ptrs;
  for (const auto& t : tries) ptrs.push_back(&t.second);
  const auto ok = ptrs.empty() ? std::vector<bool>{} : test.Test(ptrs);
  for (size_t i = 0; i < ok.size(); ++i)
    if (ok[i]) {
      ctx.log << "  " << tries[i].first << " fails the same way\n";
      state.current = std::move(tries[i].second);
      return Status::Ok();
    }
  if (auto p = SinksPrefix(current, culprit->index())) state.current = std::move(*p);
  return Status::Ok();
}

}  // namespace parity::minifier
