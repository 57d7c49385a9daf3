// The results.jsonl record of one experiment (docs/verify.md), in PyTorch/XLA's shape, as a type:
// the one writer (AppendRecord: one whole line at a time) and the one reader (ReadRecords) every
// consumer uses (verify's resume and reports, ci's gate and merge, report's HTML). Fields this
// parity does not know are kept (`extra`), so records of a newer parity round-trip.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "results/codes.h"
#include "util/status.h"

namespace parity::results {

// What a record keeps of each attempt of an experiment that ran more than once.
struct Attempt {
  Code code = Code::kVerifierDidntRun;
  std::string phase;  // the phase that decided (not for PASS)
  bool timed_out = false;
  std::string exception_type;
  std::string error;  // its first 300 characters
  nlohmann::json ToJson() const;
};

// One shape a symbolic graph was checked at (--shapes): the symbols' values and whether every
// output passed there.
struct ShapeCheck {
  std::string graph;
  std::map<std::string, int64_t> symbols;
  bool pass = true;
  nlohmann::json ToJson() const { return {{"graph", graph}, {"symbols", symbols}, {"pass", pass}}; }
  // BadInput naming `where` when `j` is not ToJson's form.
  [[nodiscard]] static Expected<ShapeCheck> FromJson(const nlohmann::json& j, const std::string& where);
};

// A rank's record of a distributed program's run (a multi-rank dir, docs/distributed.md): which
// rank, of how many, and how the ranks were replayed ("real": the backend's run of every rank in a
// process per rank; "simulated": every rank in one process, the collectives computed).
struct RankOf {
  int rank = 0;
  int world_size = 0;
  std::string replay;
  nlohmann::json ToJson() const { return {{"rank", rank}, {"world_size", world_size}, {"replay", replay}}; }
  // BadInput naming `where` when `j` is not ToJson's form.
  [[nodiscard]] static Expected<RankOf> FromJson(const nlohmann::json& j, const std::string& where);
};

struct Record {
  // "experiment": what ran, where.
  struct Experiment {
    std::string accelerator;  // cpu | cuda
    std::string accelerator_model;
    std::string backend;
    nlohmann::json backend_options = nlohmann::json::object();
    std::string test = "eval";
    std::string dtype = "float32";
    int batch_size = 0;
    std::string config;  // the expected-file configuration (statuses.h ConfigName); "" in older records
  };
  // "metrics": how long it took.
  struct Metrics {
    std::vector<double> total_time, per_iter_time;
    double compile_time_s = 0.0;
    double wall_time_s = 0.0;
    double calibration_time_s = 0.0;  // the noise budgets' eager reruns (interpreter runs, no compile)
    // wall_time_s split by phase (results/phases.h); the parts add up to the whole.
    std::map<std::string, double> phase_seconds;
    // On an accelerator, the most device memory each side held at once ("reference", "backend").
    std::map<std::string, int64_t> peak_memory_bytes;
  };
  // "model"
  std::string suite;
  std::string model;
  Experiment experiment;
  int repeat = 1;
  int iterations_per_run = 1;
  Metrics metrics;
  double timestamp = 0.0;  // when it was written: seconds since the epoch, to the microsecond (Now())
  Code code = Code::kVerifierDidntRun;  // "verification_code"
  double tolerance = 0.0;
  bool cosine = false;
  nlohmann::json outputs = nlohmann::json::array();  // per output: compare::Verdict::ToJson (path, pass, rule, stats, ...)
  std::string fingerprint;
  std::string error;           // why, when not PASS
  std::string exception_type;  // EXCEPTION_RAISED: the exception's type
  std::string notes;           // what changed the flow
  std::string rule;            // what decided PASS/FAIL: same | calibrated ("" in older records: same)
  std::string justification;   // PASS and FAIL with noise budgets: the verdict in one quotable sentence
  std::string phase;           // the phase that decided (not for PASS)
  std::optional<bool> fp64_reference;  // PASS and FAIL: whether the fp64 reference ran
  std::string reference_error;         // why it did not
  std::string repro_input;             // the repro dir verified, when the case came from one
  std::string repro_dir;               // the failure's repro dir, when one was written
  bool timed_out = false;
  std::optional<int> graph_breaks;
  std::vector<Attempt> attempts;  // every attempt, when the experiment ran more than once
  std::vector<ShapeCheck> shapes;  // the shapes its symbolic graphs were checked at (--shapes sweep)
  std::optional<RankOf> distributed;  // one rank of a distributed program's run
  nlohmann::json extra = nlohmann::json::object();

  // The record's own (first) attempt, and every attempt (that one alone when it ran once).
  Attempt FirstAttempt() const;
  std::vector<Attempt> AllAttempts() const { return attempts.empty() ? std::vector<Attempt>{FirstAttempt()} : attempts; }
  // A comparison that ran without its fp64 reference (cosine similarity, a weaker rule, decided).
  bool LacksFp64Reference() const { return fp64_reference.has_value() && !*fp64_reference; }
  // "no fp64 reference, decided by cosine similarity (why)" for such a record, else "".
  std::string WeakerRuleNote() const;
  // results::MaxAbsError of the record's outputs.
  double MaxAbsError() const;

  nlohmann::json ToJson() const;
  // kBadInput naming `where` and the field when `j` is not a record.
  [[nodiscard]] static Expected<Record> FromJson(const nlohmann::json& j, const std::string& where);
};

// Whether same() and the noise budget (the calibrated rule) disagree on any output: an output
// with a budget whose `same_pass` differs from its `noise_budget.check.within`.
bool RulesDisagree(const nlohmann::json& outputs);

// A record's timestamp for now: seconds since the epoch, to the microsecond (a run's records show
// when each experiment ended, and with metrics.wall_time_s when it started).
double Now();

// An output's statistic (`stats.<key>`), NaN when absent.
double OutputStat(const nlohmann::json& output, const char* key);

// The largest error over `outputs` (per output: compare::Verdict::ToJson) that a summary shows:
// the largest max_abs_err (0 when none has statistics), except that an output whose result holds
// NaNs where its reference does not (or the reverse) makes it NaN, and one whose infinities differ
// from its reference's makes it +inf. max_abs_err is over finite differences alone, so without
// this a result all NaN would show 0.
double MaxAbsError(const nlohmann::json& outputs);

// `parity profile` records share results.jsonl ("kind": "profile", no verification_code):
// ReadRecords skips them.
inline constexpr const char* kProfileRecordKind = "profile";
bool IsProfileRecord(const nlohmann::json& j);
// The profile records of a results file (other and torn lines are ignored).
std::vector<nlohmann::json> ReadProfileRecords(const std::filesystem::path& file);

enum class ReadMode {
  kStrict,   // a line that is not a record is kBadInput naming the file, line and field
  kLenient,  // such lines are skipped (the torn last line of a killed run, foreign lines)
};
// The records of a results file, in file order. A missing file is kBadInput in strict mode and
// no records in lenient mode.
[[nodiscard]] Expected<std::vector<Record>> ReadRecords(const std::filesystem::path& file, ReadMode mode);
// Appends the record as one JSON line (util/files.h AppendLine: a killed run leaves whole lines).
[[nodiscard]] Status AppendRecord(const std::filesystem::path& file, const Record& record);
// Fingerprints of the records already in a results file (a resumed run skips them).
std::set<std::string> DoneFingerprints(const std::filesystem::path& file);

}  // namespace parity::results
