#include <cmath>
#include <ostream>
#include <set>

#include "minifier/signature.h"
#include "minifier/steps/steps.h"

namespace parity::minifier {

namespace {

using nlohmann::json;

// Exposed values per segment at least: below this a segment's run costs more in its experiment
// (eager, fp64, the backend's start) than its compile saves.
constexpr size_t kValuesPerSegment = 8;

bool FloatingValue(const ir::Node* n) {
  return n->kind() == ir::NodeKind::kCallFunction && n->meta.size() == 1 && n->meta[0] &&
         c10::isFloatingType(n->meta[0]->dtype) && !n->HasSideEffects();
}

// The values to expose: every single floating tensor value, or an evenly spaced sample of `max`
// of them (the last always in).
std::vector<const ir::Node*> Exposed(const ir::Graph& g, int max) {
  std::vector<const ir::Node*> all;
  for (const ir::Node* n : g.nodes())
    if (FloatingValue(n)) all.push_back(n);
  if (max <= 0 || all.size() <= static_cast<size_t>(max)) return all;
  std::vector<const ir::Node*> out;
  for (int i = 1; i <= max; ++i) out.push_back(all[all.size() * i / max - 1]);
  return out;
}

// `g` returning its outputs, then every exposed value.
std::optional<ir::Graph> Exposing(const ir::Graph& g, const std::vector<const ir::Node*>& values) {
  std::vector<std::string> outs;
  for (const ir::Node* o : g.OutputValues()) outs.push_back(o->name());
  for (const ir::Node* v : values) outs.push_back(v->name());
  ir::Graph c = g.Clone();
  if (!c.SetOutputs(outs).ok() || !c.Lint().ok()) return std::nullopt;
  return c;
}

// The nodes of `g` with indices in [from, to] that compute, and what they read that cannot be
// fed as a captured value: parameters (get_attr) and values that are no single tensor (a tuple a
// getitem takes apart, a list), each with what it reads in turn. Sizes stay cut: a cut size is
// bound from the symbols.
std::set<std::string> SegmentNodes(const ir::Graph& g, size_t from, size_t to) {
  std::set<std::string> keep;
  std::vector<const ir::Node*> work;
  for (const ir::Node* n : g.nodes())
    if (n->index() >= from && n->index() <= to && n->kind() == ir::NodeKind::kCallFunction) work.push_back(n);
  for (const ir::Node* n : work) keep.insert(n->name());
  while (!work.empty()) {
    const ir::Node* n = work.back();
    work.pop_back();
    for (const ir::Node* in : n->Inputs()) {
      const bool whole_value = in->meta.size() == 1 && in->meta[0];
      const bool pull = in->kind() == ir::NodeKind::kGetAttr ||
                        (in->kind() == ir::NodeKind::kCallFunction && !whole_value && in->sym.empty());
      if (pull && keep.insert(in->name()).second) work.push_back(in);
    }
  }
  return keep;
}

double Num(const json& stats, const char* key) {
  return stats.contains(key) && stats[key].is_number() ? stats[key].get<double>() : NAN;
}

// One map entry per exposed value, from a scan run's per-output verdicts (from output `first`
// on): max abs error vs eager, RMSE vs fp64 of eager and of the backend, and how many times the
// eager error the backend's is (where the error leaves the fp64 envelope).
json DivergenceMap(const std::vector<const ir::Node*>& values, const json& outputs, size_t first) {
  json map = json::array();
  for (size_t k = 0; k < values.size() && first + k < outputs.size(); ++k) {
    const json& v = outputs[first + k];
    const json stats = v.value("stats", json::object());
    const double eager = Num(stats, "rmse_ref_vs_fp64"), backend = Num(stats, "rmse_res_vs_fp64");
    json e = {{"node", values[k]->name()},
              {"target", values[k]->target()},
              {"index", values[k]->index()},
              {"pass", v.value("pass", false)},
              {"max_abs_err", stats.value("max_abs_err", json())},
              {"rmse_eager_vs_fp64", std::isnan(eager) ? json() : json(eager)},
              {"rmse_backend_vs_fp64", std::isnan(backend) ? json() : json(backend)}};
    if (v.contains("noise_budget")) e["budgets"] = v["noise_budget"]["check"].value("budgets", 0.0);
    if (!std::isnan(eager) && !std::isnan(backend))
      e["error_ratio"] = eager > 0 ? backend / eager : (backend > 0 ? INFINITY : 1.0);
    if (e["error_ratio"].is_number() && std::isinf(e["error_ratio"].get<double>())) e["error_ratio"] = 1e300;
    map.push_back(std::move(e));
  }
  return map;
}

// The first entry of `map` that fails same(); nullptr when none does.
const json* FirstFailing(const json& map) {
  for (const auto& e : map)
    if (!e["pass"].get<bool>()) return &e;
  return nullptr;
}

// The last ATen op of `g` before node `index` (nullptr: none): where the prefix that must not
// fail ends.
const ir::Node* OpBefore(const ir::Graph& g, size_t index) {
  const ir::Node* before = nullptr;
  for (const ir::Node* n : g.ops())
    if (n->index() < index) before = n;
  return before;
}

void Fallback(StepContext& ctx, ReductionState& state, const std::string& why, int runs) {
  state.localization = {{"path", "bisection"}, {"why", why}, {"scan_runs", runs}};
  ctx.log << "divergence scan: " << why << "; node bisection\n";
}

void Found(StepContext& ctx, ReductionState& state, const ir::Node* culprit, ir::Graph reduced, json localization,
           const std::string& how) {
  state.culprit = NodeInfo(culprit);
  state.localization = std::move(localization);
  ctx.log << "divergence scan: first divergent node %" << culprit->name() << " (" << culprit->target() << ")"
          << (culprit->module_path.empty() ? "" : " in " + culprit->module_path) << ", confirmed; " << how << "\n";
  if (!culprit->stack_trace.empty()) ctx.log << "    at " << SourceLine(*culprit) << "\n";
  state.current = std::move(reduced);
}

// The whole graph returning its outputs and every value (today's one-run scan; level two, or the
// only level on a graph too small to split): the first value that fails same() is the candidate,
// confirmed by one batch (alone it fails the same way, the prefix before it does not; its own
// prefix is tried when it does not fail alone).
void WholeGraph(StepContext& ctx, ReductionState& state, Interestingness& test, int runs) {
  const ir::Graph& g = *state.current;
  std::vector<const ir::Node*> values;
  auto scan = ScanGraph(g, ctx.options.scan_max, &values);
  if (!scan) {
    Fallback(ctx, state, "no value to expose", runs);
    return;
  }
  const experiment::ExperimentResult r = ctx.run_candidates({&*scan}).at(0);
  ++state.backend_runs;
  ++runs;
  if (!Signature::FromResult(r).Matches(state.original)) {
    Fallback(ctx, state, "exposing the values changed the failure (" + Signature::FromResult(r).Describe() + ")", runs);
    return;
  }
  state.divergence = DivergenceMap(values, r.outputs, g.OutputValues().size());
  const json* cand = FirstFailing(state.divergence);
  if (cand == nullptr) {
    Fallback(ctx, state, "no exposed value fails same()", runs);
    return;
  }
  const ir::Node* culprit = g.Find((*cand)["node"].get<std::string>());
  const ir::Node* before = OpBefore(g, culprit->index());
  auto alone = CulpritAlone(g, *culprit);
  std::optional<ir::Graph> prev = before != nullptr ? SinksPrefix(g, before->index()) : std::nullopt;
  std::vector<const ir::Graph*> probes;
  if (alone) probes.push_back(&*alone);
  if (prev) probes.push_back(&*prev);
  const int runs_before = test.runs();
  const auto ok = probes.empty() ? std::vector<bool>{} : test.Test(probes);
  const bool prev_fails = prev && ok.back();
  std::optional<ir::Graph> reduced;
  if (alone && ok[0]) {
    reduced = std::move(alone);
  } else if (!prev_fails) {
    auto at = SinksPrefix(g, culprit->index());
    if (at && test.Test({&*at})[0]) reduced = std::move(at);
  }
  runs += test.runs() - runs_before;
  if (prev_fails || !reduced) {
    Fallback(ctx, state,
             "the candidate %" + culprit->name() +
                 (prev_fails ? " is not the first failing node" : " does not fail the same way, alone or as its prefix"),
             runs);
    return;
  }
  Found(ctx, state, culprit, std::move(*reduced), {{"path", "scan"}, {"scan_runs", runs}, {"exposed", values.size()}},
        std::to_string(runs) + " backend runs (" + std::to_string(values.size()) + " values exposed)");
}

// Level one: the segments in graph order, -j at a time, until one fails the same way; the first
// value of it that fails same() is the candidate, confirmed by one batch: alone on its input
// values it fails the same way, and the part of its segment before it does not. True when
// confirmed (the culprit alone is then the reduced graph); `runs` counts the backend runs made
// either way, and the divergence map holds the values of the segments run.
bool BySegments(StepContext& ctx, ReductionState& state, Interestingness& test, int& runs) {
  const ir::Graph& g = *state.current;
  const size_t jobs = static_cast<size_t>(std::max(1, ctx.runner.jobs()));
  std::vector<std::vector<const ir::Node*>> exposed;
  const auto segments = ScanSegments(g, ScanSegmentCount(static_cast<int>(jobs)), ctx.options.scan_max, &exposed);
  if (segments.empty()) return false;
  json map = json::array(), part;
  size_t failing = segments.size(), values = 0, run = 0;
  for (size_t from = 0; from < segments.size() && failing == segments.size(); from += jobs) {
    std::vector<const ir::Graph*> batch;
    for (size_t k = from; k < std::min(segments.size(), from + jobs); ++k) batch.push_back(&segments[k]);
    const auto results = ctx.run_candidates(batch);
    state.backend_runs += static_cast<int>(batch.size());
    runs += static_cast<int>(batch.size());
    run = from + batch.size();
    for (size_t i = 0; i < results.size() && failing == segments.size(); ++i) {
      const size_t k = from + i;
      const Signature sig = Signature::FromResult(results[i]);
      const bool same_failure = sig.Matches(state.original);
      part = DivergenceMap(exposed[k], results[i].outputs, 0);
      // A segment that neither passes nor fails on a value leaves the values after it unjudged.
      if (part.size() != exposed[k].size() || (!same_failure && results[i].code != results::Code::kPass)) {
        ctx.log << "divergence scan: segment " << k + 1 << " of " << segments.size() << " ran as " << sig.Describe()
                << "; the whole graph's values\n";
        return false;
      }
      for (const auto& e : part) map.push_back(e);
      values += part.size();
      if (same_failure && FirstFailing(part) != nullptr) failing = k;
    }
  }
  state.divergence = map;
  if (failing == segments.size()) {
    ctx.log << "divergence scan: no segment fails on the reference's values (" << segments.size()
            << " segments); the whole graph's values\n";
    return false;
  }
  const ir::Graph& seg = segments[failing];
  const ir::Node* culprit = g.Find((*FirstFailing(part))["node"].get<std::string>());
  const ir::Node* before = OpBefore(seg, seg.Find(culprit->name())->index());
  auto alone = CulpritAlone(g, *culprit);
  std::optional<ir::Graph> prev = before != nullptr ? SinksPrefix(seg, before->index()) : std::nullopt;
  if (!alone) return false;
  std::vector<const ir::Graph*> probes{&*alone};
  if (prev) probes.push_back(&*prev);
  const int runs_before = test.runs();
  const auto ok = test.Test(probes);
  runs += test.runs() - runs_before;
  if (!ok[0] || (prev && ok[1])) {
    ctx.log << "divergence scan: %" << culprit->name() << " of segment " << failing + 1
            << (ok[0] ? " is not its segment's first failing node" : " does not fail the same way alone")
            << "; the whole graph's values\n";
    return false;
  }
  const std::string where = "segment " + std::to_string(failing + 1) + " of " + std::to_string(segments.size());
  Found(ctx, state, culprit, std::move(*alone),
        {{"path", "scan"},
         {"scan_runs", runs},
         {"exposed", values},
         {"segments", {{"count", segments.size()}, {"run", run}, {"failing", failing + 1}}}},
        std::to_string(runs) + " backend runs (" + where + ", " + std::to_string(run) + " segments run, " +
            std::to_string(values) + " values exposed)");
  return true;
}

}  // namespace

// Two per job. Measured on a 2-core machine at -j 1 (Inductor's relu bug, fresh caches): four
// made resnet's minify (its culprit in the first quarter) 20.0 -> 15.8 s, the transformer
// blocks' (the culprit last) 16.1 -> 18.8 s, ReluNet's (mid-graph) 12.9 -> 12.5 s: no better.
int ScanSegmentCount(int jobs) { return 2 * jobs; }

std::optional<ir::Graph> ScanGraph(const ir::Graph& g, int max, std::vector<const ir::Node*>* exposed) {
  const auto values = Exposed(g, max);
  if (exposed != nullptr) *exposed = values;
  return values.empty() ? std::nullopt : Exposing(g, values);
}

std::vector<ir::Graph> ScanSegments(const ir::Graph& g, int count, int max,
                                    std::vector<std::vector<const ir::Node*>>* exposed) {
  const auto values = Exposed(g, max);
  count = std::min(count, static_cast<int>(values.size() / kValuesPerSegment));
  if (count < 2) return {};
  std::vector<ir::Graph> out;
  std::vector<std::vector<const ir::Node*>> groups;
  size_t from = 0;
  for (size_t k = 0; k < static_cast<size_t>(count); ++k) {
    const size_t n = values.size(), c = static_cast<size_t>(count);
    std::vector<const ir::Node*> vals(values.begin() + static_cast<std::ptrdiff_t>(n * k / c),
                                      values.begin() + static_cast<std::ptrdiff_t>(n * (k + 1) / c));
    std::vector<std::string> outs;
    for (const ir::Node* v : vals) outs.push_back(v->name());
    auto seg = g.Extract(SegmentNodes(g, from, vals.back()->index()), outs);
    if (!seg.ok()) return {};
    seg->EliminateDeadCode();
    if (!seg->Lint().ok()) return {};
    from = vals.back()->index() + 1;
    out.push_back(std::move(*seg));
    groups.push_back(std::move(vals));
  }
  if (exposed != nullptr) *exposed = std::move(groups);
  return out;
}

Status DivergenceScan(StepContext& ctx, ReductionState& state, Interestingness& test) {
  const char* skip = !ctx.options.scan                               ? "off (--no-scan)"
                     : !ctx.run_candidates                           ? "not with --check"
                     : state.original.kind != FailureKind::kAccuracy ? "not an accuracy failure"
                     : state.base.test == "train"                    ? "train mode compares loss and gradients, not values"
                                                                     : nullptr;
  if (skip != nullptr) {
    state.localization = {{"path", "bisection"}, {"why", std::string("scan ") + skip}, {"scan_runs", 0}};
    return Status::Ok();
  }
  int runs = 0;
  if (!BySegments(ctx, state, test, runs)) WholeGraph(ctx, state, test, runs);
  return Status::Ok();
}

}  // namespace parity::minifier
