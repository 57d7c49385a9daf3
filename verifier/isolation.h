// Runs experiments in isolated child processes (verifier/child.h), each in its own process
// group with a timeout, and owns the persistent Python workers they use: one per job slot, so
// `jobs` experiments can run at once. Shared by `parity verify` and `parity minify`.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "verifier/experiment.h"
#include "verifier/worker.h"

namespace parity::verifier {

using ExperimentBatch = std::vector<std::pair<ExperimentSpec, std::filesystem::path>>;

// What the drivers need of a runner (the minifier's steps take this, so tests can fake it).
class ExperimentRunner {
 public:
  virtual ~ExperimentRunner() = default;
  // Runs up to jobs() experiments at once; results in the order given. A crash, hang or kill is
  // VERIFIER_DIDNT_RUN with the way it ended.
  virtual std::vector<ExperimentResult> RunMany(ExperimentBatch batch) = 0;
  virtual int jobs() const = 0;
};

class IsolatedRunner final : public ExperimentRunner {
 public:
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, int jobs = 1);
  ~IsolatedRunner() override;

  // One request to slot 0's worker (capture, listings, repro scripts); a worker that died is
  // restarted on the next request.
  [[nodiscard]] Expected<nlohmann::json> Ask(const nlohmann::json& request);

  ExperimentResult Run(ExperimentSpec spec, const std::filesystem::path& dir) { return RunMany({{std::move(spec), dir}})[0]; }
  std::vector<ExperimentResult> RunMany(ExperimentBatch batch) override;
  int jobs() const override { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    std::unique_ptr<WorkerProcess> worker;
    std::optional<WorkerClient> client;
  };
  struct Running;
  [[nodiscard]] Status EnsureWorker(size_t slot);
  void RestartWorker(size_t slot);
  // Starts batch[index] in `slot`; a failure to start is written into `result`.
  std::optional<Running> Start(ExperimentBatch& batch, size_t index, size_t slot, ExperimentResult& result);
  void WaitAll(std::vector<Running>& running);
  std::filesystem::path scratch_;
  int timeout_s_;
  std::vector<Slot> slots_;
};

}  // namespace parity::verifier
