// Runs experiments in isolated child processes (`parity _experiment`), each in its own process
// group with a timeout, and owns the persistent Python workers they use: one per job slot, so
// `jobs` experiments can run at once. Shared by `parity verify` and `parity minify`.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "verifier/experiment.h"
#include "verifier/worker.h"

namespace parity::verifier {

class IsolatedRunner {
 public:
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, int jobs = 1);
  ~IsolatedRunner();

  // The worker of slot 0, connected, for driver requests (capture, listings).
  [[nodiscard]] Expected<WorkerClient*> Worker();
  // One request to slot 0's worker; {"ok": false} answers become Runtime errors.
  [[nodiscard]] Expected<nlohmann::json> Ask(const nlohmann::json& request);

  // Runs one experiment (blocking). A crash, hang or kill is VERIFIER_DIDNT_RUN with the way it
  // ended, the phase it was in and the tail of its log.
  ExperimentResult Run(ExperimentSpec spec, const std::filesystem::path& dir);
  // Runs up to `jobs` experiments at once; results in the order given.
  std::vector<ExperimentResult> RunMany(std::vector<std::pair<ExperimentSpec, std::filesystem::path>> batch);

  int jobs() const { return static_cast<int>(slots_.size()); }
  int experiments_run() const { return experiments_run_; }

 private:
  struct Slot {
    std::unique_ptr<WorkerProcess> worker;
    std::optional<WorkerClient> client;
  };
  [[nodiscard]] Status EnsureWorker(size_t slot);
  void RestartWorker(size_t slot);
  std::filesystem::path scratch_;
  int timeout_s_;
  std::vector<Slot> slots_;
  int experiments_run_ = 0;
};

bool UsesPythonWorker(const std::string& backend);

}  // namespace parity::verifier
