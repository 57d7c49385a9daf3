// `parity verify` and `parity ci` over a matrix that holds multi-rank dirs (world.h): the plain
// repro dirs and suite models go to verify::Verify as they are, and so do the rank dirs of a
// multi-rank dir whose ranks share no collective (each a repro dir of its own: its records
// "<model>.rank<r>", replay "per-rank", train gradients and SGD step judged, every backend); each
// other multi-rank dir is run once per
// backend of the matrix as `repro run` runs it (replay.h: the backend's run of every rank for real,
// each rank judged against the outputs its program stored with the simulated fp64 reference;
// backend "eager": the simulated replay), and every rank gets a record in the same results.jsonl
// (results::Record with `distributed`: its rank, the world size, the replay; model
// "<model>.rank<r>"), so the gate, the reports and the HTML read them as any record. A run's
// verdict is every rank's: the console says it per dir.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "verify/verify.h"

namespace parity::distributed {

// The dirs of `dirs` that are multi-rank dirs, and the others (in the order given).
struct SplitDirs {
  std::vector<std::string> worlds, plain;
};
SplitDirs SplitWorldDirs(const std::vector<std::string>& dirs);

// What verify::Verify does for the whole matrix, multi-rank dirs included. A bad multi-rank dir
// (World::Load's error, a test or dtype it was not captured in) is set aside as verify sets aside
// a bad repro dir. `hooks` apply to the plain experiments (a world's run is not retried).
[[nodiscard]] Expected<verify::VerifySummary> VerifyWithWorlds(const verify::VerifyOptions& options, std::ostream& out,
                                                               const verify::VerifyHooks& hooks = {});

}  // namespace parity::distributed
