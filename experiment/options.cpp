#include "experiment/options.h"

#include "compare/same.h"
#include "experiment/devices.h"
#include "experiment/shapes.h"

namespace parity::experiment {
using nlohmann::json;

Status CheckRule(const std::string& rule) {
  if (rule == kRuleSame || rule == kRuleCalibrated) return Status::Ok();
  return Error::BadInput("--rule " + rule + ": expected " + kRuleSame + " or " + kRuleCalibrated);
}

json ExperimentOptions::ToJson() const {
  json j = {{"cosine", cosine},
            {"ignore_non_fp", ignore_non_fp},
            {"batch_size", batch_size},
            {"repeat", repeat},
            {"iterations_per_run", iterations_per_run},
            {"timeout_s", timeout_s},
            {"jobs", jobs},
            {"shapes", shapes},
            {"noise_budgets", noise_budgets},
            {"while_limit", while_limit},
            {"cache_dir", cache_dir.string()},
            {"imports", imports}};
  j["backend_options"] = backend_options ? *backend_options : json(nullptr);
  j["device"] = device ? json(*device) : json(nullptr);
  j["tol"] = tol ? json(*tol) : json(nullptr);
  j["rule"] = rule ? json(*rule) : json(nullptr);
  return j;
}

Expected<ExperimentOptions> ExperimentOptions::FromJson(const json& j) {
  if (!j.is_object()) return Error::BadInput("experiment options: not an object");
  ExperimentOptions o;
  auto bad = [](const char* key, const char* what) { return Error::BadInput(std::string("experiment options: field \"") + key + "\" " + what); };
  auto integer = [&](const char* key, int& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_number_integer()) return bad(key, "is not an integer");
    out = j[key].get<int>();
    return Status::Ok();
  };
  auto boolean = [&](const char* key, bool& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_boolean()) return bad(key, "is not a boolean");
    out = j[key].get<bool>();
    return Status::Ok();
  };
  if (j.contains("backend_options") && !j["backend_options"].is_null()) {
    if (!j["backend_options"].is_object()) return bad("backend_options", "is not an object");
    o.backend_options = j["backend_options"];
  }
  if (j.contains("device") && !j["device"].is_null()) {
    if (!j["device"].is_string()) return bad("device", "is not a string");
    o.device = j["device"].get<std::string>();
  }
  if (j.contains("tol") && !j["tol"].is_null()) {
    if (!j["tol"].is_number()) return bad("tol", "is not a number");
    o.tol = j["tol"].get<double>();
  }
  PARITY_RETURN_IF_ERROR(boolean("cosine", o.cosine));
  PARITY_RETURN_IF_ERROR(boolean("ignore_non_fp", o.ignore_non_fp));
  PARITY_RETURN_IF_ERROR(boolean("noise_budgets", o.noise_budgets));
  if (j.contains("while_limit")) {
    if (!j["while_limit"].is_number_integer()) return bad("while_limit", "is not an integer");
    o.while_limit = j["while_limit"].get<int64_t>();
  }
  PARITY_RETURN_IF_ERROR(integer("batch_size", o.batch_size));
  PARITY_RETURN_IF_ERROR(integer("repeat", o.repeat));
  PARITY_RETURN_IF_ERROR(integer("iterations_per_run", o.iterations_per_run));
  PARITY_RETURN_IF_ERROR(integer("timeout_s", o.timeout_s));
  PARITY_RETURN_IF_ERROR(integer("jobs", o.jobs));
  if (j.contains("shapes")) {
    if (!j["shapes"].is_string()) return bad("shapes", "is not a string");
    o.shapes = j["shapes"].get<std::string>();
  }
  if (j.contains("rule") && !j["rule"].is_null()) {
    if (!j["rule"].is_string()) return bad("rule", "is not a string");
    o.rule = j["rule"].get<std::string>();
  }
  if (j.contains("cache_dir")) {
    if (!j["cache_dir"].is_string()) return bad("cache_dir", "is not a string");
    o.cache_dir = j["cache_dir"].get<std::string>();
  }
  if (j.contains("imports")) {
    if (!j["imports"].is_array()) return bad("imports", "is not an array");
    for (const auto& m : j["imports"]) {
      if (!m.is_string()) return bad("imports", "holds a non-string");
      o.imports.push_back(m.get<std::string>());
    }
  }
  return o;
}

Status ExperimentOptions::Check() const {
  if (tol) PARITY_RETURN_IF_ERROR(compare::CheckTolerance(*tol, "--tol"));
  if (batch_size < 0) return Error::BadInput("--batch-size " + std::to_string(batch_size) + ": expected 0 (the model's) or more");
  if (repeat < 1) return Error::BadInput("--repeat " + std::to_string(repeat) + ": expected 1 or more");
  if (iterations_per_run < 1)
    return Error::BadInput("--iterations-per-run " + std::to_string(iterations_per_run) + ": expected 1 or more");
  if (timeout_s < 1) return Error::BadInput("--timeout " + std::to_string(timeout_s) + ": expected 1 or more seconds");
  if (jobs < 1) return Error::BadInput("--jobs " + std::to_string(jobs) + ": expected 1 or more");
  if (while_limit < 0) return Error::BadInput("--while-limit " + std::to_string(while_limit) + ": expected 0 (the rule) or more");
  PARITY_RETURN_IF_ERROR(ParseShapes(shapes));
  if (device)
    if (std::string why = DeviceUnavailable(*device); !why.empty()) return Error::BadInput("--device " + *device + ": " + why);
  if (rule) PARITY_RETURN_IF_ERROR(CheckRule(*rule));
  return Status::Ok();
}

}  // namespace parity::experiment
