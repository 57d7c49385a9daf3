// What verify records of an experiment: the results.jsonl record (results/record.h) of a spec,
// its result and what the run knows beside them, and the expected-file configuration of a
// spec (results/statuses.h ConfigName, with the backend named as PyTorch names it).
#pragma once

#include <string>
#include <vector>

#include "results/record.h"
#include "experiment/experiment.h"

namespace parity::verify {

// What the record says beyond the spec and the result.
struct RecordContext {
  std::string accelerator_model;              // CPU model name or CUDA device name
  int batch_size = 0;                         // the batch size the capture used
  // The experiment's job, start to end, and what the driver spent around it: the record's wall
  // time is their sum, and its phase_seconds the job's own phases plus "capture", "process" (the
  // job's time its process did not account for) and "reports".
  double job_wall_s = 0.0;
  double capture_s = 0.0;
  double reports_s = 0.0;
  std::string repro_input;                    // the repro dir verified, when the case came from one
  std::string repro_dir;                      // the failure's repro dir, when one was written
  int graphs = 0;                             // graphs in the repro dir (graph_breaks = graphs - 1), 0 when unknown
  std::vector<experiment::ExperimentResult> attempts;  // every attempt, when the experiment ran more than once
};

results::Record RecordOf(const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& result, const RecordContext& context);
// The record's wall time and phases with the driver's time (RecordContext's) added.
void AddDriverTime(results::Record& record, const RecordContext& context);
// What a record keeps of one attempt.
results::Attempt AttemptOf(const experiment::ExperimentResult& result);
// The expected-file configuration: `torch_compile:<name>` is <name> as PyTorch names it, unless
// parity has a backend of that name (torch_compile:aot_eager and parity's aot_eager must not
// share an expected file).
std::string ConfigOfSpec(const experiment::ExperimentSpec& spec);

}  // namespace parity::verify
