#include "compare/compare_files.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "repro/safetensors.h"

namespace parity::compare {

namespace {
std::string Num(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
}  // namespace

Expected<std::pair<std::string, double>> ParseTolOverride(const std::string& spec) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return Error::BadInput("--tol-override \"" + spec + "\": expected NAME=TOL");
  try {
    size_t used = 0;
    double tol = std::stod(spec.substr(eq + 1), &used);
    if (used != spec.size() - eq - 1 || !(tol >= 0)) throw std::invalid_argument("tol");
    return std::make_pair(spec.substr(0, eq), tol);
  } catch (const std::exception&) {
    return Error::BadInput("--tol-override \"" + spec + "\": \"" + spec.substr(eq + 1) + "\" is not a non-negative number");
  }
}

Expected<FileComparison> CompareFiles(const std::filesystem::path& ref_path, const std::filesystem::path& res_path,
                                      const CompareFilesOptions& options) {
  PARITY_ASSIGN_OR_RETURN(auto ref, safetensors::File::Open(ref_path));
  PARITY_ASSIGN_OR_RETURN(auto res, safetensors::File::Open(res_path));
  std::optional<safetensors::File> fp64;
  if (options.fp64_ref) {
    PARITY_ASSIGN_OR_RETURN(auto f, safetensors::File::Open(*options.fp64_ref));
    fp64.emplace(std::move(f));
  }
  std::set<std::string> ref_names;
  for (const auto& info : ref.tensors()) {
    ref_names.insert(info.name);
    if (!res.contains(info.name))
      return Error::BadInput(res_path.string() + ": has no tensor \"" + info.name + "\" (present in " + ref_path.string() + ")");
    if (fp64 && !fp64->contains(info.name))
      return Error::BadInput(options.fp64_ref->string() + ": has no tensor \"" + info.name + "\" (present in " +
                             ref_path.string() + ")");
  }
  for (const auto& info : res.tensors())
    if (!ref_names.count(info.name))
      return Error::BadInput(res_path.string() + ": tensor \"" + info.name + "\" is not in " + ref_path.string());
  for (const auto& [name, tol] : options.tol_overrides)
    if (!ref_names.count(name))
      return Error::BadInput("--tol-override: no tensor named \"" + name + "\" in " + ref_path.string());

  FileComparison out;
  for (const auto& info : ref.tensors()) {
    PARITY_ASSIGN_OR_RETURN(at::Tensor a, ref.Get(info.name));
    PARITY_ASSIGN_OR_RETURN(at::Tensor b, res.Get(info.name));
    std::optional<at::Tensor> f;
    if (fp64) {
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, fp64->Get(info.name));
      f = t;
    }
    SameOptions so = options.same;
    if (auto it = options.tol_overrides.find(info.name); it != options.tol_overrides.end()) so.tol = it->second;
    Verdict v = SameTensor(a, b, f, so);
    v.path = info.name;
    out.pass = out.pass && v.pass;
    out.tensors.emplace_back(info.name, std::move(v));
  }
  return out;
}

nlohmann::json FileComparison::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [name, v] : tensors) arr.push_back(v.ToJson());
  return {{"pass", pass}, {"tensors", arr}};
}

std::string VerdictTable(const std::vector<std::pair<std::string, Verdict>>& rows) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-32s %-5s %-16s %10s %10s %10s %10s %10s\n", "output", "ok", "rule", "max_abs", "max_rel",
                "mismatch", "rmse_ref", "rmse_res");
  os << line;
  for (const auto& [name, v] : rows) {
    const TensorStats s = v.stats.value_or(TensorStats{});
    std::string shown = name.size() > 32 ? "..." + name.substr(name.size() - 29) : name;
    std::snprintf(line, sizeof line, "%-32s %-5s %-16s %10s %10s %10lld %10s %10s\n", shown.c_str(), v.pass ? "PASS" : "FAIL",
                  ToString(v.rule), Num(s.max_abs_err).c_str(), Num(s.max_rel_err).c_str(), static_cast<long long>(s.mismatches),
                  Num(s.rmse_ref_vs_fp64).c_str(), Num(s.rmse_res_vs_fp64).c_str());
    os << line;
    if (!v.pass && !v.message.empty()) os << "    " << v.message << "\n";
  }
  return os.str();
}

std::string FileComparison::ToText() const { return VerdictTable(tensors) + (pass ? "PASS\n" : "FAIL\n"); }

}  // namespace parity::compare
