// parity compare REF RES [--fp64-ref F] [--tol T] [--cosine] [--equal-nan] [--json]
#include <iostream>

#include "cli/commands.h"
#include "compare/compare_files.h"

namespace parity::cli {

namespace {

struct CompareArgs {
  std::string ref, res, fp64_ref;
  double tol = 1e-4;
  bool cosine = false, equal_nan = false, json = false, no_exact_dtype = false, ignore_non_fp = false;
  std::vector<std::string> tol_overrides;
};

int RunCompare(const CompareArgs& a) {
  compare::CompareFilesOptions o;
  Unwrap(compare::CheckTolerance(a.tol, "--tol"));
  o.same.tol = a.tol;
  o.same.cos_similarity = a.cosine;
  o.same.equal_nan = a.equal_nan;
  o.same.exact_dtype = !a.no_exact_dtype;
  o.same.ignore_non_fp = a.ignore_non_fp;
  if (!a.fp64_ref.empty()) o.fp64_ref = a.fp64_ref;
  for (const auto& spec : a.tol_overrides) o.tol_overrides.insert(Unwrap(compare::ParseTolOverride(spec)));
  auto result = Unwrap(compare::CompareFiles(a.ref, a.res, o));
  std::cout << (a.json ? result.ToJson().dump(2) + "\n" : result.ToText());
  return result.pass ? 0 : 1;
}

}  // namespace

void set_compare_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare two safetensors files with torch._dynamo.utils.same() semantics");
  cmd->add_option("ref", args->ref, "reference tensors (.safetensors)")->required();
  cmd->add_option("res", args->res, "result tensors (.safetensors), same names")->required();
  cmd->add_option("--fp64-ref", args->fp64_ref, "float64 reference tensors (enables the RMSE rule)");
  cmd->add_option("--tol", args->tol, "tolerance (default 1e-4)");
  cmd->add_option("--tol-override", args->tol_overrides, "NAME=TOL, a per-tensor tolerance (repeatable)");
  cmd->add_flag("--cosine", args->cosine, "cosine-similarity mode");
  cmd->add_flag("--equal-nan", args->equal_nan, "NaNs in the same places compare equal");
  cmd->add_flag("--no-exact-dtype", args->no_exact_dtype, "cast ref to res's dtype instead of failing on mismatch");
  cmd->add_flag("--ignore-non-fp", args->ignore_non_fp, "pass non-floating tensors that differ");
  cmd->add_flag("--json", args->json, "print per-tensor verdicts and stats as JSON");
  cmd->callback([args, &exit_code] { exit_code = RunCompare(*args); });
}

}  // namespace parity::cli
