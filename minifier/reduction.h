// The state the minify pipeline's steps share and the checkpoint saves: what fails (the
// signature, confirmed), where (stage, graph, culprit), the graph as reduced so far and the
// counts the summary reports. Steps read and update it; minify.cpp runs them in order.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "minifier/ahead.h"
#include "minifier/interesting.h"
#include "minifier/minify.h"
#include "minifier/signature.h"
#include "repro/graph.h"
#include "experiment/runner.h"

namespace parity::minifier {

struct ReductionState {
  std::string source;             // the original repro dir, absolute
  experiment::ExperimentSpec base;  // backend, options, test, device, tol, ...
  Signature original;
  nlohmann::json confirm = {{"runs", 0}, {"failing", 0}};
  nlohmann::json stages;  // stage bisection's table (null: not run)
  std::string first_failing_stage;
  size_t graph_index = 0;            // the graph being reduced
  std::optional<ir::Graph> current;  // set once the graph is chosen
  nlohmann::json culprit;            // the first failing node, from the scan or node bisection (null: none)
  nlohmann::json localization;       // how the culprit was found: {"path": "scan" | "bisection", "why", runs}
  nlohmann::json divergence;         // the scan's per-node errors (null: no scan)
  nlohmann::json compiler_culprit;   // the compiler bisection's answer (null: not run; steps.h CompilerBisect)
  std::vector<std::string> inlined;  // higher-order calls replaced by their subgraphs' nodes (steps.h InlineSubgraphsStep)
  int backend_runs = 0;              // this run's runs outside the reduction tests (not saved)
  // This run's wall time per step, in the order they ran: [{"step", "seconds"}] (not saved).
  nlohmann::json step_seconds = nlohmann::json::array();
  nlohmann::json passes = nlohmann::json::array();

  // The checkpoint's state.json (the graph is saved beside it as a repro dir).
  nlohmann::json ToJson() const;
  // Restores a checkpoint of the same source and backend; nullopt when it is another's.
  static std::optional<ReductionState> FromJson(const nlohmann::json& j, const std::string& source, const std::string& backend);

  // The checkpoint in `out` (state.json beside checkpoint/, a repro dir of the graph so far) of a
  // run on the same source and backend, its graph restored; nullopt when there is none.
  static std::optional<ReductionState> LoadCheckpoint(const std::filesystem::path& out, const experiment::ExperimentSpec& base,
                                                      size_t graph_count);
  // Saves `g` as the checkpoint (best effort: a lost checkpoint costs a rerun).
  void SaveCheckpoint(const std::filesystem::path& out, const CandidateWriter& writer, const ir::Graph& g) const;
};

// A node as the summary names it: name, target, module path, stack trace.
nlohmann::json NodeInfo(const ir::Node* n);

// Where a node comes from, as the log names it: the model's own line (the innermost frame
// outside torch: ir::ModelLine), else its stack trace's first line; "" without one.
std::string SourceLine(const ir::Node& n);

// What the steps may use besides the state.
struct StepContext {
  const ReproDir& repro;
  const MinifyOptions& options;
  experiment::ExperimentRunner& runner;
  std::ostream& log;
  // A test of candidates of graph `graph_index` (fed from that graph's inputs).
  std::function<std::unique_ptr<Interestingness>(size_t graph_index)> test_for_graph;
  // --check as a judge of written dirs (unset without --check).
  DirJudge check;
  std::filesystem::path scratch;
  // Candidates of the graph being reduced run through the backend as one batch (-j at a time),
  // each one's whole result (the per-output verdicts and errors), in order; unset with --check.
  std::function<std::vector<experiment::ExperimentResult>(const std::vector<const ir::Graph*>&)> run_candidates;
  // The experiment run_candidates runs for a graph (the candidate written; the same spec and dir
  // for the same graph), for a run made ahead; nullopt when it cannot be written.
  std::function<std::optional<std::pair<experiment::ExperimentSpec, std::filesystem::path>>(const ir::Graph&)> candidate_run{};
  // Where runs made ahead go (RunAhead); nullptr: none are.
  AheadRunner* ahead = nullptr;
  // The CPU cores of this machine (what compiles share).
  int cpus = 1;
  // One request to the Python worker (unset: none to ask).
  std::function<Expected<nlohmann::json>(const nlohmann::json&)> ask{};
  // Writes a graph of the graph being reduced as a repro dir (its inputs, the failure recorded).
  std::function<Status(const ir::Graph&, const std::filesystem::path&)> write_graph{};
};

}  // namespace parity::minifier
