// Records as verify writes them, for the ci/ tests.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "results/record.h"

namespace parity::testing {

inline nlohmann::json RecJson(const std::string& name, const std::string& code, const std::string& phase = "", double rmse = 1e-8,
                              const std::string& backend = "fault") {
  nlohmann::json r = {
      {"model", {{"suite_name", "repro"}, {"model_name", name}}},
      {"experiment", {{"accelerator", "cpu"}, {"backend", backend}, {"test", "eval"}, {"dtype", "float32"}}},
      {"verification_code", code},
      {"fingerprint", name + "-" + backend},
      {"tolerance", 1e-4},
      {"metrics", {{"wall_time_s", 1.5}}},
      {"outputs", {{{"path", "out"}, {"pass", code == "PASS"}, {"stats", {{"rmse_res_vs_fp64", rmse}, {"max_abs_err", rmse}}}}}}};
  if (!phase.empty()) r["phase"] = phase;
  return r;
}

// The same as a typed record (results/record.h).
inline results::Record Rec(const std::string& name, const std::string& code, const std::string& phase = "", double rmse = 1e-8,
                           const std::string& backend = "fault") {
  return results::Record::FromJson(RecJson(name, code, phase, rmse, backend), "test").value();
}

inline constexpr const char* kConfig = "cpu_fault_repro_inference";

}  // namespace parity::testing
