// Experiments in isolated children: ExperimentSpecs as jobs of runtime/jobs.h (one process
// each, a deadline each, `jobs` at once with a Python worker per slot), and the child's side,
// `parity _experiment`, which runs the flow. A child that crashed, hung or was killed is
// VERIFIER_DIDNT_RUN with the way it ended, the phase it was in and the tail of its log.
// Shared by `parity verify`, `parity ci` and `parity minify`.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/jobs.h"
#include "experiment/experiment.h"

namespace parity::experiment {

using ExperimentBatch = std::vector<std::pair<ExperimentSpec, std::filesystem::path>>;

// What the drivers need of a runner (the minifier's steps take this, so tests can fake it).
class ExperimentRunner {
 public:
  virtual ~ExperimentRunner() = default;
  // Runs up to jobs() experiments at once; results in the order given.
  virtual std::vector<ExperimentResult> RunMany(ExperimentBatch batch) = 0;
  virtual int jobs() const = 0;
};

class IsolatedRunner final : public ExperimentRunner {
 public:
  // `slot_env`: one entry per slot (runtime::SlotEnvironments); empty: one slot.
  // A job whose result poisons its process (PoisonsItsProcess) retires the processes that ran it.
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env);
  IsolatedRunner(std::filesystem::path scratch, int timeout_s, int jobs = 1)
      : IsolatedRunner(std::move(scratch), timeout_s, std::vector<std::vector<std::string>>(std::max(1, jobs))) {}

  // Experiments in job servers, one per slot, kept across experiments (runtime/jobs.h) and
  // replaced when one crashes, hangs or is poisoned (PoisonsItsProcess): for many small
  // experiments in a row, as minify's candidates are.
  void UsePersistentRunners();
  // Starts the slots' runners (and, with `workers`, their Python workers) now, without waiting;
  // `warm_device`: the workers prepare a backend's first compile there (runtime::JobRunner::Prestart).
  void Prestart(bool workers, const std::string& warm_device = {}) { jobs_.Prestart(workers, warm_device); }
  int runners_started() const { return jobs_.servers_started(); }
  // Slots whose Python worker was found warm (kept by an earlier run: --keep-workers).
  int workers_adopted() const { return jobs_.workers_adopted(); }

  // One request to slot 0's Python worker.
  [[nodiscard]] Expected<nlohmann::json> Ask(const nlohmann::json& request) { return jobs_.Ask(request); }

  ExperimentResult Run(ExperimentSpec spec, const std::filesystem::path& dir) { return RunMany({{std::move(spec), dir}})[0]; }
  std::vector<ExperimentResult> RunMany(ExperimentBatch batch) override;
  // As runtime::JobRunner::RunStream: `on_done` returning true runs the experiment again.
  using OnDone = std::function<bool(size_t index, const ExperimentResult& result)>;
  void RunStream(ExperimentBatch batch, const OnDone& on_done, const runtime::JobRunner::OnStart& on_start = nullptr,
                 const runtime::JobRunner::OnTick& on_tick = nullptr);
  int jobs() const override { return jobs_.slots(); }

 private:
  runtime::JobRunner jobs_;
};

// The slots' environments for `jobs` experiments at once, on CUDA or the CPU, on this machine
// (runtime::SlotEnvironments with its GPUs, $CUDA_VISIBLE_DEVICES and cores): what verify's and
// minify's runners start their processes with.
std::vector<std::vector<std::string>> SlotEnvironmentsHere(int jobs, bool cuda);

// The result of a job's outcome: its result.json, else VERIFIER_DIDNT_RUN saying how it ended.
ExperimentResult ResultOf(const runtime::JobOutcome& outcome);

// The child's side: `parity _experiment --dir DIR` runs DIR/spec.json's experiment in DIR.
int ExperimentChildMain(const std::filesystem::path& dir);
// A job server's side: `parity _experiment --serve SOCKET` runs the experiments its driver sends.
int ExperimentServerMain(const std::string& socket);

// Whether an experiment's result leaves the process that ran it unfit for the next experiment:
// a CUDA error (the context is lost), an out-of-memory, an error cuBLAS, cuDNN or NCCL report.
bool PoisonsItsProcess(const ExperimentResult& result);

}  // namespace parity::experiment
