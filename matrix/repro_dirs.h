// The repro dirs a command was given, each read and checked once (every file and field valid,
// its host ops' modules approved, captured in the test and dtype asked for) into a value every
// later step takes: the matrix, the host-op imports, the device, the records.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "matrix/options.h"
#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::matrix {

// A repro dir as given on the command line, read.
struct LoadedDir {
  std::string dir;       // as given
  std::string absolute;  // as a spec names it (experiment::Case::FromRepro)
  std::shared_ptr<const ReproDir> repro;
};

// A repro dir that could not be verified (bad input: the message names its file and field).
struct BadDir {
  std::string dir;
  Error error;
};

struct LoadedDirs {
  std::vector<LoadedDir> good;  // in the order given
  std::vector<BadDir> bad;      // one bad dir among several is reported, the others still run
  // The loaded dir `dir` names (as given, or as a spec names it: absolute), or nullptr.
  std::shared_ptr<const ReproDir> Find(const std::string& dir) const;
};

// Reads and checks each of options.repro_dirs once.
// A dir of `read` (named as given) is taken as it was read, only checked: a multi-rank dir's rank
// dirs, read by distributed::World::Load, are not read again.
LoadedDirs LoadReproDirs(const MatrixOptions& options, const std::vector<LoadedDir>& read = {});

// A repro dir holds one capture: one test and one dtype. Asking it for another is bad input
// naming manifest.json's field, not a silent run of what it holds.
[[nodiscard]] Status CheckCapturedAs(const ReproDir& repro, const MatrixOptions& options);

// The worker imports the modules of the dirs' host ops (an import error is exit 2 before
// anything runs, not an EAGER_FAILED per experiment).
[[nodiscard]] Status ImportHostOps(const LoadedDirs& dirs, const MatrixOptions& options,
                                   const std::function<Expected<nlohmann::json>(const nlohmann::json&)>& ask);

// Whether any experiment runs on CUDA: --device, else a repro dir's own device.
bool UsesCuda(const MatrixOptions& options, const LoadedDirs& dirs);
// UsesCuda before the dirs are read: --device, else each dir's manifest "device" field, read
// without the rest of the dir. nullopt where it cannot say (a manifest that does not read or
// parse: the dir's read reports it). It can differ from UsesCuda's answer after the read only
// where a dir that turns out bad names CUDA; the caller asks UsesCuda again then.
std::optional<bool> UsesCudaBeforeReading(const MatrixOptions& options);

}  // namespace parity::matrix
