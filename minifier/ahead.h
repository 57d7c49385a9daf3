// Runs made ahead of the steps that judge them. Some experiments are known before the step that
// needs them runs (the confirmations of the original, the stage runs, the divergence scan's run
// of the original graph): run as one batch at the start, one slot compiles the longest while the
// others take the rest in turn, and runs of one graph follow each other in one slot (the second
// finds the compile in its process). A step that asks later for the same experiment (spec and
// dir) gets the result made ahead; everything else goes to the runner this one wraps.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "experiment/runner.h"

namespace parity::minifier {

class AheadRunner final : public experiment::ExperimentRunner {
 public:
  explicit AheadRunner(experiment::ExperimentRunner& inner) : inner_(inner) {}

  // Runs `batch` now, in its order (the longest first), and keeps the results for RunMany.
  void RunAhead(experiment::ExperimentBatch batch);
  // Each experiment's result: the one made ahead (taken, so a second ask runs it again), else a
  // run of the wrapped runner (those together, in one batch). Results in the order given.
  std::vector<experiment::ExperimentResult> RunMany(experiment::ExperimentBatch batch) override;
  int jobs() const override { return inner_.jobs(); }
  // Whether the experiment has a result made ahead.
  bool Has(const experiment::ExperimentSpec& spec, const std::filesystem::path& dir) const;
  // Drops the results no step asked for and returns how many there were (backend runs made all
  // the same).
  int DropUnused();

 private:
  static std::string Key(const experiment::ExperimentSpec& spec, const std::filesystem::path& dir);
  experiment::ExperimentRunner& inner_;
  std::map<std::string, experiment::ExperimentResult> made_;
};

}  // namespace parity::minifier
