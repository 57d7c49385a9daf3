// Both ends of the experiment child process, `parity _experiment` (hidden subcommand). The
// driver writes DIR/spec.json and spawns the child; the child writes the name of each phase to
// DIR/status.txt as it starts and its result to DIR/result.json; the driver reads the result
// back, or, when the child crashed, hung or was killed, builds VERIFIER_DIDNT_RUN from the way
// it ended, the phase it was in and the tail of DIR/log.txt. Nothing else knows these names.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/subprocess.h"
#include "verifier/experiment.h"

namespace parity::verifier {

// The hidden subcommand and its options (cli/cmd_experiment.cpp registers them).
inline constexpr const char* kExperimentCommand = "_experiment";

// Driver side: prepares DIR (spec.work_dir becomes DIR) and starts the child. `worker_socket`
// (may be empty) is the Python worker the child talks to; `env` extra NAME=VALUE entries.
[[nodiscard]] Expected<Child> SpawnExperiment(ExperimentSpec spec, const std::filesystem::path& dir,
                                              const std::string& worker_socket, const std::vector<std::string>& env = {});
// Driver side: the phase a running child is in ("" before its first).
std::string CurrentPhase(const std::filesystem::path& dir);
// Driver side: the result of a child that ended as `how` (`timeout_s` for the message).
ExperimentResult CollectExperiment(const std::filesystem::path& dir, const ExitInfo& how, int timeout_s);

// Child side: the entry of `parity _experiment --dir DIR`. Exit 0 when result.json was written.
int ExperimentChildMain(const std::filesystem::path& dir);

}  // namespace parity::verifier
