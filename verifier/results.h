// Verification codes (PyTorch/XLA's experiment_runner) and results.jsonl: the record of one
// experiment, appended atomically, and the fingerprints a resumed run skips.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::verifier {

enum class Code { kPass, kFail, kEagerFailed, kExceptionRaised, kNondeterministicEagerRun, kVerifierSkipped, kVerifierDidntRun };
const char* ToString(Code c);
[[nodiscard]] Expected<Code> ParseCode(const std::string& s);
// FAIL, EAGER_FAILED, EXCEPTION_RAISED, NONDETERMINISTIC_EAGER_RUN, VERIFIER_DIDNT_RUN fail a run.
bool IsFailure(Code c);

struct ExperimentSpec;
struct ExperimentResult;

// What the record says beyond the spec and the result.
struct RecordContext {
  std::string accelerator_model;  // CPU model name or CUDA device name
  int batch_size = 0;             // the batch size the capture used
  double wall_time_s = 0.0;
  std::string repro_input;               // the repro dir verified, when the case came from one
  std::string repro_dir;                 // the failure's repro dir, when one was written
  int graphs = 0;                        // graphs in the repro dir (graph_breaks = graphs - 1), 0 when unknown
  std::vector<nlohmann::json> attempts;  // AttemptJson of every attempt, when the experiment ran more than once
};

// What the record keeps of each attempt of an experiment that ran more than once:
// verification_code, phase, timed_out, exception_type and the start of the error.
nlohmann::json AttemptJson(const ExperimentResult& result);

// The results.jsonl record of one experiment (docs/verify.md), in PyTorch/XLA's shape.
nlohmann::json ResultRecord(const ExperimentSpec& spec, const ExperimentResult& result, const RecordContext& context);

// A record whose fp64 reference could not run (a comparison by cosine similarity decided
// instead): every report says so, and `parity ci --strict` fails it.
bool LacksFp64Reference(const nlohmann::json& record);
// "no fp64 reference, decided by cosine similarity (why)" for such a record, else "".
std::string WeakerRuleNote(const nlohmann::json& record);

// `parity profile` records share results.jsonl ("kind": "profile", no verification_code):
// readers of verification records skip them.
inline constexpr const char* kProfileRecordKind = "profile";
bool IsProfileRecord(const nlohmann::json& j);
// The profile records of a results file (other and torn lines are ignored).
std::vector<nlohmann::json> ReadProfileRecords(const std::filesystem::path& file);

// Appends one JSON line with a single write(2) to an O_APPEND file, then fsync: a killed run
// leaves whole lines only.
[[nodiscard]] Status AppendJsonLine(const std::filesystem::path& file, const nlohmann::json& line);
// Empty when `j` has the shape of a record (string verification_code and fingerprint, object
// model and experiment), else what is wrong with it, naming the field.
std::string RecordProblem(const nlohmann::json& j);
// The records of a results file (torn or foreign lines are ignored; `parity ci --results` reads
// strictly with ci/merge.h's ReadRecords).
std::vector<nlohmann::json> ReadResults(const std::filesystem::path& file);
// Fingerprints of the lines already in a results file.
std::set<std::string> DoneFingerprints(const std::filesystem::path& file);

}  // namespace parity::verifier
