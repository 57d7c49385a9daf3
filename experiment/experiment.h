// One verification experiment, as PyTorch's accuracy checks run it: eager twice with a fixed
// seed (a mismatch is NONDETERMINISTIC_EAGER_RUN), an fp64 reference (cosine when it cannot
// run), the backend, then same() with the suite's tolerance. ExperimentSpec says what to run
// (made by experiment/case.h from a suite model or a repro dir), ExperimentResult what came of it.
// experiment/runner.h runs it in an isolated child process.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "results/codes.h"
#include "results/record.h"

namespace parity::experiment {

// When an experiment measures its outputs' noise budgets (compare/budget.h: four more eager runs
// of each graph). The calibrated rule needs them to decide; under same() they say whether rounding
// alone explains a failure (minify's signature tells the two apart) or that a PASS is further
// from fp64 than rounding goes.
enum class NoiseBudgets {
  kNever,        // no budget (minify's candidates under same(): only the verdict matters there)
  kWhereNeeded,  // the calibrated rule: every graph; same(): the graphs where same() fails an output
  kAlways,       // every graph (--noise-budgets; the divergence scan's runs)
};
const char* ToString(NoiseBudgets n);

// An experiment comes to a verification code (results/codes.h).
using results::Code;
using results::ParseCode;
using results::ToString;

struct ExperimentSpec {
  std::string model;  // suite name or repro dir's model
  std::string suite;
  std::string repro;  // the captured repro dir
  // Its tensors file as the driver checked its digest (ReproDir::verified_tensors): the child
  // trusts it instead of hashing the file again; "" the child checks. Not in the fingerprint.
  std::string verified_tensors;
  std::string backend;
  nlohmann::json backend_options = nlohmann::json::object();
  std::string test = "eval";  // eval | train
  std::string dtype = "float32";
  std::string device = "cpu";
  int batch_size = 0;
  int repeat = 1;
  int iterations_per_run = 1;
  std::optional<double> tol;  // --tol; else the suite default
  bool cosine = false;
  bool ignore_non_fp = false;  // integer/bool outputs that differ do not fail (minify's default)
  std::string cache_dir;
  std::string work_dir;
  std::vector<std::string> imports;  // approved modules for host ops (host_ops/host_ops.h); not in the fingerprint
  int sweep = 0;                     // shapes beyond the recorded one a symbolic graph runs at (--shapes)
  std::string rule = "same";         // --rule (experiment/options.h): what decides PASS/FAIL
  NoiseBudgets noise_budgets = NoiseBudgets::kWhereNeeded;  // not in the fingerprint
  int64_t while_limit = 0;  // --while-limit (0: the interpreter's rule)
  // A rank of a multi-rank dir whose ranks share no collective, verified as a repro dir of its
  // own (distributed/verify_worlds.h): its rank and world size; rank -1 otherwise.
  int rank = -1;
  int world_size = 0;

  nlohmann::json ToJson() const;
  [[nodiscard]] static Expected<ExperimentSpec> FromJson(const nlohmann::json& j);
  // Stable identity for resume (a SHA-256 of everything that defines the experiment, nothing
  // that varies: scratch paths, where the capture lives).
  std::string Fingerprint() const;
};

struct ExperimentResult {
  Code code = Code::kVerifierDidntRun;
  std::string error;  // why, when not PASS
  std::string phase;  // the phase that decided (or was running)
  double tol = 0.0;
  bool cosine = false;
  double compile_time_s = 0.0;
  std::vector<double> total_time, per_iter_time;
  nlohmann::json outputs = nlohmann::json::array();  // per-output verdicts and stats
  std::string exception_type;                        // EXCEPTION_RAISED: the exception's type, when known
  std::string failed_graph;                          // EXCEPTION_RAISED in a dir of several graphs: whose (its name heads `error`)
  std::string traceback;                             // EXCEPTION_RAISED in the Python worker: its traceback
  int signal = 0;                                    // VERIFIER_DIDNT_RUN: the signal that ended the process
  bool timed_out = false;                            // VERIFIER_DIDNT_RUN: killed at the deadline
  std::string notes;  // what changed the flow
  // Why the fp64 reference could not run ("" when it ran for every graph): the comparison then
  // fell back to cosine similarity, a weaker rule, and every report says so.
  std::string reference_error;
  bool has_fp64_reference() const { return reference_error.empty(); }
  std::vector<results::ShapeCheck> shapes;  // --shapes sweep: each shape of a symbolic graph and its verdict
  // PASS and FAIL with noise budgets: the verdict in one sentence (which output, how many
  // budgets, how many elements, the worst one, which rule disagrees).
  std::string justification;
  double calibration_time_s = 0.0;  // the noise budgets' eager reruns
  // The experiment's wall time in its process by phase (results::kPhases; experiment/phase_clock.h).
  std::map<std::string, double> phase_seconds;
  // On an accelerator, the most device memory each side held at once: "reference" (parity's
  // interpreter runs) and "backend" (the worker's compile and runs); empty on the CPU.
  std::map<std::string, int64_t> peak_memory_bytes;
  // On an accelerator, its name as the experiment's worker says it ("NVIDIA H200"); "" where the
  // experiment never asked its worker anything (the driver asks a worker of its own then).
  std::string device_name;
  nlohmann::json ToJson() const;
  static ExperimentResult FromJson(const nlohmann::json& j);
};

// Called with each step's name as it starts (load, capability, eager, eager_2nd_run,
// fp64_reference, backend, calibration, compare): what status.txt says, and where a result that
// ends early says it ended (ExperimentResult::phase).
using PhaseFn = std::function<void(const std::string& phase)>;

// An experiment this process runs later (a job server's next job: runtime/jobs.h), prepared while
// an earlier one waits for a worker still starting: its repro dir read, its backend made, its
// graphs' reference steps run as far as the wait allowed. What they make of the record (a failure,
// notes) is kept and said at its turn, as running ahead within one experiment does; the time is
// the earlier experiment's (its record's `ahead` phase). Nothing run ahead talks to the worker: a
// step that would (a host op, a backend that asks the worker what it supports) ends the
// preparation, and the experiment runs afresh at its turn.
class PreparedExperiment {
 public:
  explicit PreparedExperiment(ExperimentSpec spec);
  ~PreparedExperiment();
  PreparedExperiment(const PreparedExperiment&) = delete;
  PreparedExperiment& operator=(const PreparedExperiment&) = delete;
  const ExperimentSpec& spec() const;
  // One more step of it; false when none is left, or it cannot go on.
  bool Step();
  struct State;  // flow_state.h

 private:
  friend ExperimentResult RunExperiment(const ExperimentSpec&, const PhaseFn&, PreparedExperiment*,
                                        const std::vector<PreparedExperiment*>&);
  std::unique_ptr<State> state_;
};

// Runs the flow in this process: from `prepared` where it is this spec's and went ahead (else
// afresh); `next`, the experiments this process runs next, go ahead in order while this one waits
// for its worker to start.
ExperimentResult RunExperiment(const ExperimentSpec& spec, const PhaseFn& on_phase, PreparedExperiment* prepared = nullptr,
                               const std::vector<PreparedExperiment*>& next = {});

}  // namespace parity::experiment
