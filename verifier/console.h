// What `parity verify` prints: a line per experiment as it ends (with a live status line before
// it on a TTY), then the table and the totals.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "verifier/experiment.h"
#include "verifier/verify.h"

namespace parity::verifier {

class VerifyConsole {
 public:
  VerifyConsole(std::ostream& out, bool progress, size_t total) : out_(out), progress_(progress), total_(total) {}
  void Started(size_t index, const ExperimentSpec& spec);
  void Finished(size_t index, const ExperimentSpec& spec, const ExperimentResult& result, double wall_s);
  void Summary(const VerifySummary& summary);

 private:
  std::ostream& out_;
  bool progress_;
  size_t total_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace parity::verifier
