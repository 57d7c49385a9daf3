#include <cmath>
#include <ostream>
#include <set>

#include "minifier/steps/steps.h"

namespace parity::minifier {

namespace {

using nlohmann::json;

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

double Num(const json& stats, const char* key) {
  return stats.contains(key) && stats[key].is_number() ? stats[key].get<double>() : NAN;
}

// One map entry per exposed value, from the scan's per-output verdicts (after the graph's own
// outputs): max abs error vs eager, RMSE vs fp64 of eager and of the backend, and how many times
// the eager error the backend's is (where the error leaves the fp64 envelope).
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

void Fallback(StepContext& ctx, ReductionState& state, const std::string& why, int runs) {
  state.localization = {{"path", "bisection"}, {"why", why}, {"scan_runs", runs}};
  ctx.log << "divergence scan: " << why << "; node bisection\n";
}

}  // namespace

std::optional<ir::Graph> ScanGraph(const ir::Graph& g, int max, std::vector<const ir::Node*>* exposed) {
  const auto values = Exposed(g, max);
  if (exposed != nullptr) *exposed = values;
  return values.empty() ? std::nullopt : Exposing(g, values);
}

Status DivergenceScan(StepContext& ctx, ReductionState& state, Interestingness& test) {
  const char* skip = !ctx.options.scan                               ? "off (--no-scan)"
                     : !ctx.run_candidate                            ? "not with --check"
                     : state.original.kind != FailureKind::kAccuracy ? "not an accuracy failure"
                     : state.base.test == "train"                    ? "train mode compares loss and gradients, not values"
                                                                     : nullptr;
  if (skip != nullptr) {
    state.localization = {{"path", "bisection"}, {"why", std::string("scan ") + skip}, {"scan_runs", 0}};
    return Status::Ok();
  }
  const ir::Graph& g = *state.current;
  std::vector<const ir::Node*> values;
  auto scan = ScanGraph(g, ctx.options.scan_max, &values);
  if (!scan) {
    Fallback(ctx, state, "no value to expose", 0);
    return Status::Ok();
  }
  const verifier::ExperimentResult r = ctx.run_candidate(*scan);
  ++state.backend_runs;
  if (!Signature::FromResult(r).Matches(state.original)) {
    Fallback(ctx, state, "exposing the values changed the failure (" + Signature::FromResult(r).Describe() + ")", 1);
    return Status::Ok();
  }
  const size_t first = g.OutputValues().size();
  state.divergence = DivergenceMap(values, r.outputs, first);
  const json* cand = nullptr;
  for (const auto& e : state.divergence)
    if (!e["pass"].get<bool>()) {
      cand = &e;
      break;
    }
  if (cand == nullptr) {
    Fallback(ctx, state, "no exposed value fails same()", 1);
    return Status::Ok();
  }
  // Confirm: the prefix before the candidate does not fail the same way, and the candidate does,
  // alone on its input values (then that is the reduced graph) or else as its prefix.
  const auto ops = g.ops();
  const ir::Node* culprit = g.Find((*cand)["node"].get<std::string>());
  const ir::Node* before = nullptr;
  for (const ir::Node* n : ops)
    if (n->index() < culprit->index()) before = n;
  auto alone = CulpritAlone(g, *culprit, false);
  std::optional<ir::Graph> prev = before != nullptr ? SinksPrefix(g, before->index(), false) : std::nullopt;
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
    auto at = SinksPrefix(g, culprit->index(), false);
    if (at && test.Test({&*at})[0]) reduced = std::move(at);
  }
  const int confirm_runs = test.runs() - runs_before;
  if (prev_fails || !reduced) {
    Fallback(ctx, state,
             "the candidate %" + culprit->name() +
                 (prev_fails ? " is not the first failing node" : " does not fail the same way, alone or as its prefix"),
             1 + confirm_runs);
    return Status::Ok();
  }
  state.culprit = NodeInfo(culprit);
  state.localization = {{"path", "scan"}, {"scan_runs", 1 + confirm_runs}, {"exposed", values.size()}};
  ctx.log << "divergence scan: first divergent node %" << culprit->name() << " (" << culprit->target() << ")"
          << (culprit->module_path.empty() ? "" : " in " + culprit->module_path) << ", confirmed; " << 1 + confirm_runs
          << " backend runs (" << values.size() << " values exposed)\n";
  if (!culprit->stack_trace.empty()) ctx.log << "  " << culprit->stack_trace.substr(0, culprit->stack_trace.find('\n')) << "\n";
  state.current = std::move(*reduced);
  return Status::Ok();
}

}  // namespace parity::minifier
