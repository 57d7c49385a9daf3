// The "interesting" test of the reduction, llvm-reduce style: is this candidate graph still
// failing the same way? The delta driver and the pipeline steps ask only this interface, so
// unit tests drive them with a fake.
//
// CandidateTest is the real one: it writes each candidate as a repro dir (real values; cut edges
// become placeholders fed with the reference's concrete values), hands the written dirs to a
// judge, and caches verdicts by graph text. The two judges: the backend run in isolated children
// with the signature matched (BackendJudge), and the user's --check command (CheckCommandJudge).
// Both judge up to `jobs` dirs at once.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "minifier/signature.h"
#include "repro/repro_dir.h"
#include "experiment/runner.h"

namespace parity::minifier {

class Interestingness {
 public:
  virtual ~Interestingness() = default;
  // True where the candidate still fails the same way, in the order given.
  virtual std::vector<bool> Test(const std::vector<const ir::Graph*>& candidates) = 0;
  // Candidates actually judged (not cached, not unwritable).
  virtual int runs() const = 0;
  virtual int cache_hits() const = 0;
};

// Writes candidate graphs of one graph of the repro being reduced as repro dirs.
// Adds to `requires_grad` (a graph entry's differentiated inputs: placeholders by name, get_attr
// nodes by target) the name of every node of `g` whose value autograd differentiates: a floating
// value computed from a differentiated one (detach aside). A candidate that cuts such a value into
// a placeholder differentiates it as the original did: the culprit alone on its input values is
// then a train repro whose loss has a gradient, not one that fails in its reference's backward
// ("element 0 of tensors does not require grad") where the original computed one.
void DifferentiatedValues(const ir::Graph& g, std::set<std::string>& requires_grad);

class CandidateWriter {
 public:
  // `tensors`: every tensor a candidate may read: the original ones by key, and the reference
  // value of every tensor-valued node as "ref/<node>". `original`: the graph being reduced (its
  // placeholders' tensor keys, what the program ran it as). `manifest`: the original's, with
  // backend and options set; candidates are written with the graph's mode, dtype and autocast
  // as their top level. A candidate returning what the original returns keeps its recorded
  // gradients (tangents), or its loss. Any other train candidate is fed, as the tangent of each
  // value it returns, the gradient that value got in the original's backward ("vjp/<node>" in
  // `tensors`, AddReferenceValues): the program's own backward from there on, so no made-up loss
  // changes the failure (a sum() of a normalization's output has a gradient of zero, which any
  // rounding "fails"). Where none is known (or fits the value's shape), a sum() of its values is
  // the loss (steps/loss.h).
  CandidateWriter(Manifest manifest, const GraphEntry& original, const std::map<std::string, at::Tensor>& tensors);
  // Whether a candidate can be written at all (every placeholder has a concrete value).
  bool Writable(const ir::Graph& g) const;
  [[nodiscard]] Status Write(const ir::Graph& g, const std::filesystem::path& dir, const nlohmann::json& failure) const;
  const std::string& graph_name() const { return graph_name_; }
  // Candidates written from now on store their outputs' reference values as the expected outputs
  // (what a judge that compares with stored outputs reads: a multi-rank replay's).
  void StoreReferenceOutputs() { store_outputs_ = true; }

 private:
  std::string KeyFor(const std::string& placeholder) const;
  // Each returned value's tangent ("" where the original did not differentiate it: none set is a
  // forward-only check), from the pool's "vjp/" values; nullopt where the pool has none or one
  // does not fit.
  std::optional<std::vector<std::pair<std::string, at::Tensor>>> CutTangents(const ir::Graph& g) const;
  Manifest manifest_;
  std::string graph_name_;
  std::map<std::string, std::string> inputs_;
  std::vector<std::string> tangents_;      // the original's, for candidates with its outputs
  std::vector<std::string> output_nodes_;  // the original's outputs, by node name
  std::optional<std::set<std::string>> requires_grad_;
  const std::map<std::string, at::Tensor>& tensors_;
  bool store_outputs_ = false;
};

// Adds the reference's concrete value of every tensor node of `entry` to `pool` as
// "ref/<node>": what feeds the placeholders that cut edges become; for a train graph also the
// gradient each value got in its backward as "vjp/<node>" (what a cut's values are fed); where
// the interpreter cannot run that backward, `log` (when given) is told that cuts get a sum() loss.
[[nodiscard]] Status AddReferenceValues(const ReproDir& repro, const GraphEntry& entry, const std::string& device,
                                        std::map<std::string, at::Tensor>& pool, std::ostream* log = nullptr);

// Judges written repro dirs: true = still interesting.
using DirJudge = std::function<std::vector<bool>(const std::vector<std::filesystem::path>& dirs)>;

// Runs each dir through `base`'s backend (spec.repro set per dir) and matches `original`.
DirJudge BackendJudge(experiment::ExperimentRunner& runner, experiment::ExperimentSpec base, Signature original,
                      std::filesystem::path scratch);
// Runs `command "<dir>"` (also in $PARITY_CANDIDATE) through /bin/sh; exit 0 = interesting.
DirJudge CheckCommandJudge(std::string command, int jobs, int timeout_s);

class CandidateTest final : public Interestingness {
 public:
  CandidateTest(CandidateWriter writer, DirJudge judge, std::filesystem::path scratch, nlohmann::json failure)
      : writer_(std::move(writer)), judge_(std::move(judge)), scratch_(std::move(scratch)), failure_(std::move(failure)) {}
  std::vector<bool> Test(const std::vector<const ir::Graph*>& candidates) override;
  int runs() const override { return runs_; }
  int cache_hits() const override { return cache_hits_; }

 private:
  CandidateWriter writer_;
  DirJudge judge_;
  std::filesystem::path scratch_;
  nlohmann::json failure_;
  std::map<std::string, bool> cache_;
  int runs_ = 0, cache_hits_ = 0, serial_ = 0;
};

}  // namespace parity::minifier
