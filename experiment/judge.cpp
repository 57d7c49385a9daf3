#include "experiment/judge.h"

#include <map>

#include "compare/histogram.h"
#include "compare/same.h"
#include "experiment/options.h"
#include "experiment/shapes.h"

namespace parity::experiment {

namespace {

ExperimentResult Finish(ExperimentResult r, Code code, std::string error = "") {
  r.code = code;
  r.error = std::move(error);
  return r;
}

compare::SameOptions SameOptionsOf(const ExperimentSpec& spec, const ExperimentResult& r) {
  compare::SameOptions so;
  so.cos_similarity = r.cosine;
  so.equal_nan = true;
  so.ignore_non_fp = spec.ignore_non_fp;
  return so;
}

// One compared result as the justification sees it.
struct Judged {
  std::string path;
  bool same_pass = true;
  std::string same_message;
  std::optional<compare::NoiseBudget> budget;
  std::optional<compare::BudgetCheck> check;
};

// The verdict in one sentence a maintainer can quote: under the calibrated rule, the failing
// output furthest beyond its budget (or the one closest to it on a PASS); under same(), its
// first failure and what the budget says of it, or a PASS the budget disagrees with.
std::string Justify(const std::vector<Judged>& judged, bool calibrated) {
  const Judged* worst = nullptr;  // the furthest beyond (or closest to) its budget
  const Judged* first_same_fail = nullptr;
  int over = 0, same_fails = 0, measured = 0;
  for (const Judged& j : judged) {
    if (!j.same_pass) {
      ++same_fails;
      if (!first_same_fail) first_same_fail = &j;
    }
    if (!j.check) continue;
    ++measured;
    over += !j.check->within;
    if (!worst || j.check->budgets > worst->check->budgets) worst = &j;
  }
  if (measured == 0) return "";
  auto more = [](int n, const char* what) { return n > 1 ? "; " + std::to_string(n - 1) + " more " + what : std::string(); };
  const std::string largest = worst->path + " at " + compare::Num3(worst->check->budgets) + " budgets";
  if (calibrated) {
    if (over > 0) return compare::Sentence(worst->path, *worst->budget, *worst->check) + more(over, "outputs exceed their budgets");
    std::string s = "every output within its noise budget (the closest: " + largest + ")";
    for (const Judged& j : judged)
      if (!j.check && !j.same_pass) return s + "; " + j.path + " has no budget and fails same(): " + j.same_message;
    return s + (same_fails > 0 ? "; same() would fail " + std::to_string(same_fails) + " of them" : "");
  }
  if (first_same_fail) {
    const Judged& f = *first_same_fail;
    if (!f.check) return "same() fails " + f.path + ": " + f.same_message + " (no noise budget for it)" + more(same_fails, "outputs fail same()");
    if (f.check->within)
      return "same() fails " + f.path + " (" + f.same_message + "), but its error is " + compare::Num3(f.check->budgets) +
             " noise budgets from fp64: rounding alone can explain it (--rule calibrated passes it)" +
             more(same_fails, "outputs fail same()");
    return "same() fails " + compare::Sentence(f.path, *f.budget, *f.check) + more(same_fails, "outputs fail same()");
  }
  if (over > 0)
    return "same() passes every output, but " + compare::Sentence(worst->path, *worst->budget, *worst->check) +
           " (--rule calibrated fails it)";
  return "every output passes same() and is within its noise budget (the closest: " + largest + ")";
}

}  // namespace

// same() on every reference result against the backend's, and each result against its noise
// budget; spec.rule says which decides.
ExperimentResult Judge(const ExperimentSpec& spec, ExperimentResult r, const Collected& c) {
  std::map<std::string, at::Tensor> got(c.got.begin(), c.got.end());
  compare::SameOptions so = SameOptionsOf(spec, r);
  const bool calibrated = spec.rule == kRuleCalibrated;
  bool all = true;
  std::string first_failure;
  std::vector<Judged> judged;
  for (size_t k = 0; k < c.ref.size(); ++k) {
    const auto& [name, want] = c.ref[k];
    so.tol = c.tols[k];
    compare::Verdict v;
    Judged j;
    nlohmann::json hist;  // the error distribution, for reports
    auto it = got.find(name);
    if (it == got.end()) {
      v.pass = false;
      v.rule = compare::Rule::kStructure;
      v.message = "the backend did not return " + name;
    } else {
      std::optional<at::Tensor> f;
      if (c.fp64_ok) f = c.fp64[k].second.to(at::kCPU);
      const at::Tensor ref = want.to(at::kCPU), res = it->second.to(at::kCPU);
      v = compare::SameTensor(ref, res, f, so);
      if (f) hist = compare::ErrorHistogram(ref, res, *f);
      if (f && c.budgets[k] && ref.sizes() == res.sizes() && ref.scalar_type() == res.scalar_type()) {
        j.budget = c.budgets[k];
        j.check = compare::CheckBudget(*j.budget, *f, ref, res);
      }
    }
    v.path = c.shown[k];
    j.path = v.path;
    j.same_pass = v.pass;
    j.same_message = v.message;
    if (calibrated && j.check) {
      v.pass = j.check->within;
      v.rule = compare::Rule::kNoiseBudget;
      v.message = compare::Sentence("", *j.budget, *j.check);
    }
    if (!v.pass && first_failure.empty()) first_failure = c.shown[k] + ": " + v.message;
    all = all && v.pass;
    r.outputs.push_back(v.ToJson());
    nlohmann::json& out = r.outputs.back();
    if (c.tols[k] != r.tol) out["tol"] = c.tols[k];
    if (!hist.is_null()) out["error_hist"] = std::move(hist);
    if (j.check) {
      out["same_pass"] = j.same_pass;
      out["noise_budget"] = j.budget->ToJson();
      out["noise_budget"]["check"] = j.check->ToJson();
    }
    judged.push_back(std::move(j));
  }
  r.justification = Justify(judged, calibrated);
  for (const auto& sp : c.spans) {
    results::ShapeCheck check{sp.graph, {sp.symbols.begin(), sp.symbols.end()}, true};
    for (size_t k = sp.begin; k < sp.end; ++k) check.pass = check.pass && r.outputs[k].value("pass", false);
    r.shapes.push_back(std::move(check));
  }
  if (!all && !r.shapes.empty()) {
    std::string at;
    for (const auto& sh : r.shapes)
      if (!sh.pass) at += (at.empty() ? "" : "; ") + sh.graph + " at " + PointLabel({sh.symbols.begin(), sh.symbols.end()});
    if (!at.empty()) first_failure += " (fails " + at + ")";
  }
  if (got.size() > c.ref.size() && all)
    return Finish(r, Code::kFail,
                  "the backend returned " + std::to_string(got.size()) + " results, expected " + std::to_string(c.ref.size()));
  return all ? Finish(r, Code::kPass) : Finish(r, Code::kFail, first_failure);
}


}  // namespace parity::experiment
