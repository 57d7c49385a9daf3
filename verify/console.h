// What `parity verify` prints: a line per experiment as it ends (its wall time and the phases
// that took most of it), then the table, the totals and where the run's time went by phase; on
// a TTY also a live status line: each running experiment (i/N), its current phase and its
// elapsed time.
#pragma once

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "results/record.h"
#include "experiment/experiment.h"
#include "verify/verify.h"

namespace parity::verify {

class VerifyConsole {
 public:
  VerifyConsole(std::ostream& out, bool progress, size_t total) : out_(out), progress_(progress), total_(total) {}
  // `dir`: the experiment child's dir (its phase is read from there); empty when none runs.
  void Started(size_t index, const experiment::ExperimentSpec& spec, const std::filesystem::path& dir = {});
  void Tick();  // redraws the status line (a TTY only)
  void Finished(size_t index, const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& result,
                const results::Record::Metrics& metrics);
  void Summary(const VerifySummary& summary);

 private:
  std::ostream& out_;
  bool progress_;
  size_t total_;
  std::vector<std::vector<std::string>> rows_;
  std::map<std::string, double> phase_totals_;
  double wall_total_ = 0.0;
  struct Running {
    std::string label;
    std::filesystem::path dir;
    std::chrono::steady_clock::time_point started;
  };
  std::map<size_t, Running> running_;
};

}  // namespace parity::verify
