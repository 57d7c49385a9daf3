// Runs experiments in isolated child processes (verifier/child.h), each in its own process
// group with its own timeout, and owns the persistent Python workers they use: one per job
// slot, so `jobs` experiments run at once; a slot's child and worker get the slot's extra
// environment (its GPU, its share of CPU threads: SlotEnvironments). Shared by `parity verify`,
// `parity ci` and `parity minify`.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "verifier/experiment.h"
#include "verifier/worker.h"

namespace parity::verifier {

using ExperimentBatch = std::vector<std::pair<ExperimentSpec, std::filesystem::path>>;

// The extra environment of each of `jobs` slots. On CUDA with several GPUs (`gpus`, the ids in
// `visible_devices` = $CUDA_VISIBLE_DEVICES when set, else 0..gpus-1) slot i is pinned to GPU
// i mod n; on the CPU with jobs > 1 each slot gets cpus/jobs threads (OMP_NUM_THREADS,
// MKL_NUM_THREADS). One slot gets nothing.
std::vector<std::vector<std::string>> SlotEnvironments(int jobs, bool cuda, int gpus, const std::string& visible_devices,
                                                       int cpus);

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
  // `slot_env`: one entry per slot (its size is the number of jobs); empty: one slot.
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env);
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, int jobs = 1)
      : IsolatedRunner(std::move(scratch), timeout_s, std::vector<std::vector<std::string>>(std::max(1, jobs))) {}
  ~IsolatedRunner() override;

  // One request to slot 0's worker (capture, listings, repro scripts); a worker that died is
  // restarted on the next request.
  [[nodiscard]] Expected<nlohmann::json> Ask(const nlohmann::json& request);

  ExperimentResult Run(ExperimentSpec spec, const std::filesystem::path& dir) { return RunMany({{std::move(spec), dir}})[0]; }
  std::vector<ExperimentResult> RunMany(ExperimentBatch batch) override;
  // Called in the driver's thread as each experiment ends, in the order they end; returning
  // true runs that experiment again (in `<dir>.rN`), e.g. a retry of a failure.
  using OnDone = std::function<bool(size_t index, const ExperimentResult& result)>;
  using OnStart = std::function<void(size_t index, const std::filesystem::path& dir)>;
  using OnTick = std::function<void()>;  // while experiments run, about 4 times a second
  // Keeps every slot busy until the batch is done (a new experiment starts as soon as one ends).
  void RunStream(ExperimentBatch batch, const OnDone& on_done, const OnStart& on_start = nullptr,
                 const OnTick& on_tick = nullptr);
  int jobs() const override { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    std::vector<std::string> env;
    std::unique_ptr<WorkerProcess> worker;
    std::optional<WorkerClient> client;
  };
  struct Running;
  [[nodiscard]] Status EnsureWorker(size_t slot);
  void RestartWorker(size_t slot);
  // Starts `spec` in `slot`, in `dir`; a failure to start is written into `result`.
  std::optional<Running> Start(const ExperimentSpec& spec, const std::filesystem::path& dir, size_t index, size_t slot,
                               ExperimentResult& result);
  // Waits until one of `running` ends (or passes its deadline) and returns its position.
  size_t WaitAny(std::vector<Running>& running, const OnTick& on_tick);
  ExperimentResult Finish(const ExperimentSpec& spec, Running& run);
  std::filesystem::path scratch_;
  int timeout_s_;
  std::vector<Slot> slots_;
};

}  // namespace parity::verifier
