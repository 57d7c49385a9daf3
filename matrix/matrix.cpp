#include "matrix/matrix.h"

#include <algorithm>
#include <map>
#include <regex>

#include "experiment/backend.h"
#include "experiment/case.h"

namespace parity::matrix {

namespace {

struct NameFilter {
  std::optional<std::regex> keep, drop;
  bool operator()(const std::string& name) const {
    return (!keep || std::regex_search(name, *keep)) && !(drop && std::regex_search(name, *drop));
  }
};

Expected<NameFilter> MakeFilter(const MatrixOptions& o) {
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
Expected<std::vector<SuiteModel>> SuiteModels(const MatrixOptions& o, const nlohmann::json& listing) {
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

}  // namespace

Status ValidateMatrixOptions(const MatrixOptions& o) {
  if (o.models.empty() && o.repro_dirs.empty()) return Error::BadInput("nothing to verify: give --model NAME or a repro dir");
  for (const auto& t : o.tests)
    if (t != "eval" && t != "train") return Error::BadInput("--test \"" + t + "\": expected eval or train");
  for (const auto& d : o.dtypes)
    if (d != "float32" && d != "float16" && d != "bfloat16" && d != "amp")
      return Error::BadInput("--dtype \"" + d + "\": expected float32, float16, bfloat16 or amp");
  for (const auto& b : o.backends) PARITY_RETURN_IF_ERROR(experiment::FindBackend(b));
  PARITY_RETURN_IF_ERROR(o.experiment.Check());
  PARITY_RETURN_IF_ERROR(MakeFilter(o));
  return Status::Ok();
}

Expected<std::function<bool(const std::string&)>> ModelNameFilter(const MatrixOptions& o) {
  PARITY_ASSIGN_OR_RETURN(NameFilter f, MakeFilter(o));
  return std::function<bool(const std::string&)>(f);
}

Expected<std::vector<experiment::ExperimentSpec>> ExpandMatrix(const MatrixOptions& o, const LoadedDirs& dirs,
                                                             const std::function<Expected<nlohmann::json>()>& list_models) {
  PARITY_ASSIGN_OR_RETURN(NameFilter keep, MakeFilter(o));
  std::vector<experiment::ExperimentSpec> specs;
  if (!o.models.empty()) {
    PARITY_ASSIGN_OR_RETURN(auto listing, list_models());
    PARITY_ASSIGN_OR_RETURN(auto models, SuiteModels(o, listing));
    for (const auto& m : models) {
      if (!keep(m.name)) continue;
      experiment::ExperimentOptions mopts = o.experiment;
      mopts.imports.insert(mopts.imports.end(), m.imports.begin(), m.imports.end());
      for (const auto& t : OrDefault(o.tests, "eval"))
        for (const auto& dt : OrDefault(o.dtypes, "float32"))
          for (const auto& b : o.backends) specs.push_back(experiment::Case::FromSuite(m.name, m.suite, t, dt, b, mopts));
    }
  }
  for (const auto& d : dirs.good) {
    const ReproDir& r = *d.repro;
    if (!keep(r.manifest().model)) continue;
    for (const auto& b : o.backends) {
      PARITY_ASSIGN_OR_RETURN(experiment::ExperimentSpec s, experiment::Case::FromRepro(r, b, o.experiment));
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

}  // namespace parity::matrix
