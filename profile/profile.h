// `parity profile`: where a compiled model spends its time, kernel by kernel, next to eager.
// Steps: the experiment (the one case mapping: a suite model or a repro dir), its capture, the
// profiling child (tools/parity_capture/profiling/, with a deadline: a backend that crashes or
// hangs ends the child, not parity), the report (breakdown.h), and what it leaves: a record
// ("kind": "profile") in results.jsonl, a row of performance.csv, the trace.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include "profile/breakdown.h"
#include "util/status.h"
#include "verify/verify.h"

namespace parity::profile {

struct ProfileOptions {
  // Exactly one suite model or repro dir, one backend, test and dtype, as `parity verify` takes
  // them (how it runs: matrix.experiment; where its record goes: matrix.output_dir).
  verify::VerifyOptions matrix;
  int warmup = 3;                                            // warm iterations before timing
  int iterations = 20;                                       // timed iterations (medians and spread)
  int profile_iterations = 5;                                // iterations under the profiler (after one warm-up step)
  std::optional<std::filesystem::path> trace;                // chrome/Perfetto trace of eager and backend
  std::string kernel;                                        // --kernel: benchmark this generated kernel alone
  nlohmann::json kernel_options = nlohmann::json::object();  // ... once more compiled with these options
  int top = 15;
};

[[nodiscard]] Status CheckProfileOptions(const ProfileOptions& options);

// Runs the steps; `progress` gets one line per step. The report is also recorded in
// <output_dir>/results.jsonl and <output_dir>/performance.csv.
[[nodiscard]] Expected<Report> Profile(const ProfileOptions& options, std::ostream& progress);

// The results.jsonl record of a report (no "fingerprint": verify's resume must not take a
// profile for a verified experiment).
nlohmann::json ProfileRecord(const experiment::ExperimentSpec& spec, const Report& report);

}  // namespace parity::profile
