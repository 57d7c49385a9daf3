#include "experiment/experiment.h"

#include "util/digest.h"

namespace parity::experiment {

const char* ToString(NoiseBudgets n) {
  switch (n) {
    case NoiseBudgets::kNever: return "never";
    case NoiseBudgets::kAlways: return "always";
    case NoiseBudgets::kWhereNeeded: break;
  }
  return "where_needed";
}

namespace {
// A spec's noise_budgets: its name (ToString), or a boolean as older specs wrote it.
NoiseBudgets ParseNoiseBudgets(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>() ? NoiseBudgets::kWhereNeeded : NoiseBudgets::kNever;
  for (NoiseBudgets n : {NoiseBudgets::kNever, NoiseBudgets::kWhereNeeded, NoiseBudgets::kAlways})
    if (j.is_string() && j.get<std::string>() == ToString(n)) return n;
  throw std::invalid_argument("field \"noise_budgets\": expected never, where_needed or always");
}
nlohmann::json ShapesJson(const std::vector<results::ShapeCheck>& shapes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : shapes) a.push_back(s.ToJson());
  return a;
}
}  // namespace

nlohmann::json ExperimentSpec::ToJson() const {
  nlohmann::json j = {{"model", model},
                      {"suite", suite},
                      {"repro", repro},
                      {"backend", backend},
                      {"backend_options", backend_options},
                      {"test", test},
                      {"dtype", dtype},
                      {"device", device},
                      {"batch_size", batch_size},
                      {"repeat", repeat},
                      {"iterations_per_run", iterations_per_run},
                      {"cosine", cosine},
                      {"ignore_non_fp", ignore_non_fp},
                      {"cache_dir", cache_dir},
                      {"work_dir", work_dir},
                      {"imports", imports}};
  j["tol"] = tol ? nlohmann::json(*tol) : nlohmann::json(nullptr);
  if (sweep > 0) j["sweep"] = sweep;  // absent when 0: fingerprints of earlier runs stay the same
  if (rule != "same") j["rule"] = rule;  // likewise
  j["noise_budgets"] = ToString(noise_budgets);
  if (while_limit > 0) j["while_limit"] = while_limit;  // absent when 0: fingerprints of earlier runs stay the same
  if (!verified_tensors.empty()) j["verified_tensors"] = verified_tensors;
  if (rank >= 0) j["distributed"] = {{"rank", rank}, {"world_size", world_size}};  // likewise, absent for a plain dir
  return j;
}

Expected<ExperimentSpec> ExperimentSpec::FromJson(const nlohmann::json& j) {
  try {
    ExperimentSpec s;
    s.model = j.at("model");
    s.suite = j.at("suite");
    s.repro = j.at("repro");
    s.backend = j.at("backend");
    s.backend_options = j.at("backend_options");
    s.test = j.at("test");
    s.dtype = j.at("dtype");
    s.device = j.at("device");
    s.batch_size = j.at("batch_size");
    s.repeat = j.at("repeat");
    s.iterations_per_run = j.at("iterations_per_run");
    s.cosine = j.at("cosine");
    s.ignore_non_fp = j.value("ignore_non_fp", false);
    s.cache_dir = j.at("cache_dir");
    s.work_dir = j.at("work_dir");
    s.imports = j.value("imports", std::vector<std::string>{});
    s.sweep = j.value("sweep", 0);
    s.rule = j.value("rule", std::string("same"));
    s.while_limit = j.value("while_limit", int64_t{0});
    s.verified_tensors = j.value("verified_tensors", std::string());
    if (j.contains("distributed")) {
      s.rank = j.at("distributed").at("rank");
      s.world_size = j.at("distributed").at("world_size");
    }
    s.noise_budgets = ParseNoiseBudgets(j.value("noise_budgets", nlohmann::json("where_needed")));
    if (!j.at("tol").is_null()) s.tol = j.at("tol").get<double>();
    return s;
  } catch (const std::exception& e) {
    return Error::BadInput(std::string("experiment spec: ") + e.what());
  }
}

std::string ExperimentSpec::Fingerprint() const {
  // Everything ToJson says except where things live and how failures are filtered.
  nlohmann::json j = ToJson();
  for (const char* where : {"repro", "verified_tensors", "cache_dir", "work_dir", "imports", "ignore_non_fp", "noise_budgets"}) j.erase(where);
  return Sha256Hex(j.dump()).substr(0, 32);
}

nlohmann::json ExperimentResult::ToJson() const {
  return {{"verification_code", ToString(code)},
          {"error", error},
          {"phase", phase},
          {"tol", tol},
          {"cosine", cosine},
          {"compile_time_s", compile_time_s},
          {"total_time", total_time},
          {"per_iter_time", per_iter_time},
          {"outputs", outputs},
          {"exception_type", exception_type},
          {"failed_graph", failed_graph},
          {"traceback", traceback},
          {"notes", notes},
          {"reference_error", reference_error},
          {"shapes", ShapesJson(shapes)},
          {"signal", signal},
          {"timed_out", timed_out},
          {"justification", justification},
          {"calibration_time_s", calibration_time_s},
          {"phase_seconds", phase_seconds},
          {"peak_memory_bytes", peak_memory_bytes},
          {"device_name", device_name}};
}

ExperimentResult ExperimentResult::FromJson(const nlohmann::json& j) {
  ExperimentResult r;
  r.code = ParseCode(j.value("verification_code", std::string("VERIFIER_DIDNT_RUN"))).value();
  r.error = j.value("error", std::string());
  r.phase = j.value("phase", std::string());
  r.tol = j.value("tol", 0.0);
  r.cosine = j.value("cosine", false);
  r.compile_time_s = j.value("compile_time_s", 0.0);
  r.total_time = j.value("total_time", std::vector<double>{});
  r.per_iter_time = j.value("per_iter_time", std::vector<double>{});
  r.outputs = j.value("outputs", nlohmann::json::array());
  r.exception_type = j.value("exception_type", std::string());
  r.failed_graph = j.value("failed_graph", std::string());
  r.traceback = j.value("traceback", std::string());
  r.notes = j.value("notes", std::string());
  r.reference_error = j.value("reference_error", std::string());
  for (const auto& s : j.value("shapes", nlohmann::json::array()))
    if (auto c = results::ShapeCheck::FromJson(s, "experiment result"); c.ok()) r.shapes.push_back(std::move(*c));
  r.signal = j.value("signal", 0);
  r.timed_out = j.value("timed_out", false);
  r.justification = j.value("justification", std::string());
  r.calibration_time_s = j.value("calibration_time_s", 0.0);
  r.phase_seconds = j.value("phase_seconds", std::map<std::string, double>{});
  r.peak_memory_bytes = j.value("peak_memory_bytes", std::map<std::string, int64_t>{});
  r.device_name = j.value("device_name", std::string());
  return r;
}

}  // namespace parity::experiment
