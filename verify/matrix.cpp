#include "verify/matrix.h"

#include <algorithm>
#include <map>
#include <regex>

#include "repro/repro_dir.h"
#include "verifier/backend.h"
#include "verifier/case.h"
#include "runtime/host_ops.h"

namespace parity::verify {

namespace {

struct NameFilter {
  std::optional<std::regex> keep, drop;
  bool operator()(const std::string& name) const {
    return (!keep || std::regex_search(name, *keep)) && !(drop && std::regex_search(name, *drop));
  }
};

Expected<NameFilter> MakeFilter(const VerifyOptions& o) {
  NameFilter f;
  try {
    if (!o.filter.empty()) f.keep.emplace(o.filter);
    if (!o.exclude.empty()) f.drop.emplace(o.exclude);
  } catch (const std::regex_error& e) {
    return Error::BadInput(std::string("--filter/--exclude: invalid regex: ") + e.what());
  }
  return f;
}

// A suite model as the worker lists it.
struct SuiteModel {
  std::string name, suite;
  std::vector<std::string> imports;  // modules registering its host ops: parity's own suite, approved
};

// Suite models in the suite's order ("all" expands).
Expected<std::vector<SuiteModel>> SuiteModels(const VerifyOptions& o, const nlohmann::json& listing) {
  std::map<std::string, SuiteModel> by_name;
  std::vector<std::string> order;
  for (const auto& m : listing["models"]) {
    by_name[m["name"]] = {m["name"], m["suite"], m.value("imports", std::vector<std::string>{})};
    order.push_back(m["name"]);
  }
  std::vector<SuiteModel> out;
  for (const auto& m : o.models) {
    if (m == "all") {
      for (const auto& n : order) out.push_back(by_name[n]);
    } else if (!by_name.count(m)) {
      std::string known;
      for (const auto& n : order) known += (known.empty() ? "" : ", ") + n;
      return Error::BadInput("--model \"" + m + "\": not in the suite (" + known + ")");
    } else {
      out.push_back(by_name[m]);
    }
  }
  return out;
}

std::vector<std::string> OrDefault(const std::vector<std::string>& given, const std::string& fallback) {
  return given.empty() ? std::vector<std::string>{fallback} : given;
}

// A repro dir holds one capture: one test and one dtype. Asking it for another is bad input,
// not a silent run of what it holds.
Status CheckCapturedAs(const ReproDir& r, const VerifyOptions& o) {
  const Manifest& m = r.manifest();
  auto check = [&](const std::vector<std::string>& asked, const std::string& held, const char* field,
                   const char* flag) -> Status {
    if (asked.empty() || std::find(asked.begin(), asked.end(), held) != asked.end()) return Status::Ok();
    return Error::BadInput((r.root() / "manifest.json").string() + ": field \"" + field + "\" is \"" + held + "\", but " + flag +
                           " asks for " + asked.front() + "; a repro dir runs as it was captured (capture the model with " +
                           flag + " " + asked.front() + ", or leave " + flag + " out)");
  };
  PARITY_RETURN_IF_ERROR(check(o.tests, m.mode, "mode", "--test"));
  return check(o.dtypes, m.dtype, "dtype", "--dtype");
}

}  // namespace

Status ValidateVerifyOptions(const VerifyOptions& o) {
  if (o.models.empty() && o.repro_dirs.empty()) return Error::BadInput("nothing to verify: give --model NAME or a repro dir");
  for (const auto& t : o.tests)
    if (t != "eval" && t != "train") return Error::BadInput("--test \"" + t + "\": expected eval or train");
  for (const auto& d : o.dtypes)
    if (d != "float32" && d != "float16" && d != "bfloat16" && d != "amp")
      return Error::BadInput("--dtype \"" + d + "\": expected float32, float16, bfloat16 or amp");
  for (const auto& b : o.backends) PARITY_RETURN_IF_ERROR(verifier::FindBackend(b));
  PARITY_RETURN_IF_ERROR(o.experiment.Check());
  PARITY_RETURN_IF_ERROR(MakeFilter(o));
  for (const auto& d : o.repro_dirs) PARITY_RETURN_IF_ERROR(CheckReproDir(d, o));
  return Status::Ok();
}

Status CheckReproDir(const std::string& dir, const VerifyOptions& o) {
  PARITY_ASSIGN_OR_RETURN(ReproDir r, ReproDir::Load(dir));
  PARITY_RETURN_IF_ERROR(runtime::CheckHostOpsApproved(r, o.experiment.imports));  // nothing imported without approval
  return CheckCapturedAs(r, o);
}

std::vector<BadDir> SetAsideBadDirs(VerifyOptions& o) {
  std::vector<BadDir> bad;
  std::vector<std::string> good;
  for (const auto& d : o.repro_dirs) {
    if (Status st = CheckReproDir(d, o); st.ok())
      good.push_back(d);
    else
      bad.push_back({d, st.error()});
  }
  o.repro_dirs = std::move(good);
  return bad;
}

Status ImportReproHostOps(const VerifyOptions& o, const std::function<Expected<nlohmann::json>(const nlohmann::json&)>& ask) {
  for (const auto& d : o.repro_dirs) {
    PARITY_ASSIGN_OR_RETURN(ReproDir r, ReproDir::Load(d));
    PARITY_RETURN_IF_ERROR(runtime::ImportHostOpModules(r, o.experiment.imports, ask));
  }
  return Status::Ok();
}

bool UsesCuda(const VerifyOptions& o) {
  if (o.experiment.device) return o.experiment.device->rfind("cuda", 0) == 0;
  for (const auto& d : o.repro_dirs)
    if (auto r = ReproDir::Load(d); r.ok() && r->manifest().device.rfind("cuda", 0) == 0) return true;
  return false;
}

Expected<std::function<bool(const std::string&)>> ModelNameFilter(const VerifyOptions& o) {
  PARITY_ASSIGN_OR_RETURN(NameFilter f, MakeFilter(o));
  return std::function<bool(const std::string&)>(f);
}

Expected<std::vector<verifier::ExperimentSpec>> ExpandMatrix(const VerifyOptions& o,
                                                   const std::function<Expected<nlohmann::json>()>& list_models) {
  PARITY_ASSIGN_OR_RETURN(NameFilter keep, MakeFilter(o));
  std::vector<verifier::ExperimentSpec> specs;
  if (!o.models.empty()) {
    PARITY_ASSIGN_OR_RETURN(auto listing, list_models());
    PARITY_ASSIGN_OR_RETURN(auto models, SuiteModels(o, listing));
    for (const auto& m : models) {
      if (!keep(m.name)) continue;
      verifier::ExperimentOptions mopts = o.experiment;
      mopts.imports.insert(mopts.imports.end(), m.imports.begin(), m.imports.end());
      for (const auto& t : OrDefault(o.tests, "eval"))
        for (const auto& dt : OrDefault(o.dtypes, "float32"))
          for (const auto& b : o.backends) specs.push_back(verifier::Case::FromSuite(m.name, m.suite, t, dt, b, mopts));
    }
  }
  for (const auto& dir : o.repro_dirs) {
    PARITY_ASSIGN_OR_RETURN(ReproDir r, ReproDir::Load(dir));
    if (!keep(r.manifest().model)) continue;
    PARITY_RETURN_IF_ERROR(CheckCapturedAs(r, o));
    for (const auto& b : o.backends) {
      PARITY_ASSIGN_OR_RETURN(verifier::ExperimentSpec s, verifier::Case::FromRepro(r, b, o.experiment));
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

}  // namespace parity::verify
