// The experiments of one verify run between the matrix and the records: each with its repro dir
// (the one read by the matrix, or its suite model's capture), an early result where it cannot
// run here, its attempts, and the record it comes to.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "matrix/captures.h"
#include "matrix/repro_dirs.h"
#include "results/record.h"
#include "experiment/experiment.h"
#include "experiment/runner.h"
#include "verify/verify.h"

namespace parity::verify {

// One verify run's collaborators.
struct Session {
  const VerifyOptions& o;
  experiment::IsolatedRunner& runner;
  matrix::CaptureCache captures;
  const matrix::LoadedDirs& dirs;  // the repro dirs given, each read once
  std::string accelerator;         // asked once
  std::map<std::string, std::shared_ptr<const ReproDir>> captured = {};  // suite models' captures, read once
};

// One experiment of this run and its attempts.
struct Item {
  using Clock = std::chrono::steady_clock;
  experiment::ExperimentSpec spec;
  std::shared_ptr<const ReproDir> repro;  // spec.repro, read (once per dir and run)
  bool from_repro = false;                // a repro dir given by the user, not a capture
  std::string failure_name;               // its failure repro dir's name in this run (FailureReproNames)
  std::optional<experiment::ExperimentResult> early;  // decided before it could run
  std::vector<experiment::ExperimentResult> attempts;
  Clock::time_point started = Clock::now();
  double wall_s = 0.0;     // of the first attempt's job
  double capture_s = 0.0;  // its suite model's capture, when this experiment made it
};

// Suite models are captured (once, cached) before anything runs; an experiment that cannot run
// here gets its result now.
void Prepare(std::vector<Item>& items, Session& s);

// The record of one experiment (its first attempt); a FAIL or EXCEPTION_RAISED also gets its
// repro dir.
results::Record Record(const Item& item, Session& s);

}  // namespace parity::verify
