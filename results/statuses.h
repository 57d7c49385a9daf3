// PyTorch's vocabulary for accuracy CI: the statuses the dynamo runner writes
// (benchmarks/dynamo/common.py) and the configuration names of its expected files. The one
// mapping from parity's records (verification code, phase, how it ended) to those statuses.
#pragma once

#include <string>
#include <vector>

#include "results/record.h"

namespace parity::results {

// pass, pass_due_to_skip, fail_accuracy, fail_to_run, eager_fail_to_run, eager_1st_run_fail,
// eager_1st_run_OOM, eager_2nd_run_fail, eager_2nd_run_OOM, eager_two_runs_differ,
// model_fail_to_load, timeout, OOM (the dynamo runner's), and infra_error (PyTorch's expected
// files hold it for a model its CI could not run; parity never writes it).
const std::vector<std::string>& KnownStatuses();
bool IsKnownStatus(const std::string& status);

// The status of an attempt (docs/ci.md has the table):
//   PASS -> pass; FAIL -> fail_accuracy; NONDETERMINISTIC_EAGER_RUN -> eager_two_runs_differ;
//   VERIFIER_SKIPPED -> pass_due_to_skip; EAGER_FAILED -> model_fail_to_load (capture, load),
//   eager_1st_run_fail / _OOM (eager), eager_2nd_run_fail / _OOM (eager_2nd_run), else
//   eager_fail_to_run; EXCEPTION_RAISED -> fail_to_run, OOM when out of memory;
//   VERIFIER_DIDNT_RUN -> timeout when killed at the deadline, else eager_fail_to_run (during an
//   eager phase) or fail_to_run.
std::string StatusOf(const Attempt& attempt);
// A record's status: its first attempt's.
std::string StatusOf(const Record& record);

// The dtype PyTorch's CI runs a configuration in, which its file names leave out
// (.ci/pytorch/test.sh): on CUDA training under --amp and inference in --bfloat16; on the CPU
// float32 (its `--amp` runs name "amp" after the backend).
std::string CiDefaultDtype(const std::string& device_type, const std::string& test);
// One expected file's configuration, named as PyTorch's CI names its files:
// `[<device>_]<backend>[_<dtype>]_<suite>_<mode>`, the dtype part only when it is not the CI's
// default (CiDefaultDtype): inductor_huggingface_training (CUDA, amp), inductor_timm_inference
// (CUDA, bfloat16), cpu_inductor_huggingface_inference (float32), cpu_inductor_amp_timm_inference.
// `backend` as PyTorch names it: the writer of a record maps `torch_compile:<name>` to <name>
// unless parity has a backend of that name (verify/record.h).
std::string ConfigName(const std::string& backend, const std::string& suite, const std::string& dtype, const std::string& test,
                       const std::string& device);
// The record's configuration (recorded by its writer; for records written before parity
// recorded it, computed with `torch_compile:<name>` as <name>).
std::string ConfigOf(const Record& record);

}  // namespace parity::results
