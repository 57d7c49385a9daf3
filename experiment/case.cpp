#include "experiment/case.h"

#include "compare/same.h"
#include "experiment/backend.h"
#include "experiment/shapes.h"
#include "runtime/python_env.h"

#include <cstdlib>
#include <filesystem>

namespace parity::experiment {

namespace {

void ApplyCommon(ExperimentSpec& s, const ExperimentOptions& o) {
  s.repeat = o.repeat;
  s.iterations_per_run = o.iterations_per_run;
  s.cosine = o.cosine;
  s.ignore_non_fp = o.ignore_non_fp;
  s.cache_dir = o.cache_dir.empty() ? DefaultCacheDir().string() : o.cache_dir.string();
  s.tol = o.tol;
  s.imports = o.imports;
  s.sweep = ParseShapes(o.shapes).value_or(0);  // checked with the options (ExperimentOptions::Check)
  s.rule = o.rule.value_or(kRuleSame);
  s.noise_budgets = o.noise_budgets ? NoiseBudgets::kAlways : NoiseBudgets::kWhereNeeded;
  s.while_limit = o.while_limit;
}

}  // namespace

ExperimentSpec Case::FromSuite(const std::string& model, const std::string& suite, const std::string& test,
                               const std::string& dtype, const std::string& backend, const ExperimentOptions& o) {
  ExperimentSpec s;
  s.model = model;
  s.suite = suite;
  s.backend = backend;
  s.backend_options = OptionsFor(o.backend_options.value_or(nlohmann::json::object()), backend);
  s.test = test;
  s.dtype = dtype;
  s.device = o.device.value_or("cpu");
  s.batch_size = o.batch_size;
  ApplyCommon(s, o);
  return s;
}

Expected<ExperimentSpec> Case::FromRepro(const ReproDir& repro, const std::optional<std::string>& backend,
                                         const ExperimentOptions& o) {
  const Manifest& m = repro.manifest();
  ExperimentSpec s;
  s.model = m.model;
  s.suite = m.suite;
  s.repro = std::filesystem::absolute(repro.root()).string();
  // A rank's dir of a multi-rank dir (distributed/world.h checked its field): the record names the
  // rank, "<model>.rank<r>", as a world run's records do.
  if (const auto d = m.extra.find("distributed"); d != m.extra.end() && d->is_object() && d->contains("rank") &&
                                                  (*d)["rank"].is_number_integer() && d->contains("world_size")) {
    s.rank = (*d)["rank"].get<int>();
    s.world_size = (*d)["world_size"].get<int>();
    s.model += ".rank" + std::to_string(s.rank);
  }
  s.backend = backend.value_or(m.backend.value_or(""));
  if (s.backend.empty()) return Error::BadInput((repro.root() / "manifest.json").string() + ": names no backend; pass --backend");
  // The options given for this backend replace the dir's own; where none are, a dir's options
  // for the same backend stay (options scoped to other backends are not this one's).
  const nlohmann::json given = OptionsFor(o.backend_options.value_or(nlohmann::json::object()), s.backend);
  if (!given.empty())
    s.backend_options = given;
  else if (m.backend == s.backend)
    s.backend_options = m.backend_options;
  s.test = m.mode;
  s.dtype = CapturedDtype(m.dtype, m.extra);
  s.device = o.device.value_or(m.device);
  ApplyCommon(s, o);
  if (!s.tol && m.failure.is_object() && m.failure.contains("tol") && m.failure["tol"].is_number())
    s.tol = m.failure["tol"].get<double>();
  if (!o.rule && m.failure.is_object() && m.failure.contains("rule") && m.failure["rule"].is_string() &&
      CheckRule(m.failure["rule"].get<std::string>()).ok())
    s.rule = m.failure["rule"].get<std::string>();
  return s;
}

std::string CapturedDtype(const std::string& dtype, const nlohmann::json& fields) {
  return fields.is_object() && fields.contains("amp") && fields["amp"].is_string() ? "amp" : dtype;
}

std::filesystem::path DefaultCacheDir() { return runtime::ParityCacheDir(); }

double DefaultTolerance(const std::string& suite, const std::string& test, const std::string& dtype) {
  const bool train = test == "train";
  const bool reduced = dtype == "float16" || dtype == "bfloat16" || dtype == "amp";
  if (suite == "huggingface") return train ? 1e-2 : 1e-3;
  if (suite == "timm" || suite == "torchvision-style") return train ? 1e-2 : 1e-3;
  // torchbench and everything else
  if (reduced) return train ? 1e-2 : 1e-3;
  return train ? 1e-3 : compare::kDefaultTol;
}

double EffectiveTolerance(const ExperimentSpec& spec) {
  return spec.tol.value_or(DefaultTolerance(spec.suite, spec.test, spec.dtype));
}

}  // namespace parity::experiment
