// `parity minify` of a multi-rank dir whose failure needs its collectives (no rank fails isolated,
// ranks.h): the graph is reduced on every rank at once, the collectives kept and matched.
//
// Contract:
// - Every rank must run the same graph (SPMD: each graph's text equal on every rank); else
//   kDoesNotFail naming the first rank and graph that differ.
// - The backend must run ranks for real (a torch.compile form: distributed/real.h); else Unsupported.
// - The failure is the first failing rank's, of the world's real run with the backend (its kind:
//   accuracy, the exception's type and first line, or a rank's process crashed or timed out). The
//   graph reduced is the first whose world, that graph alone on every rank, fails so.
// - A candidate is one edit of rank 0's graph (node bisection's shortest failing prefix, then the
//   delta passes of delta.h), applied to every rank
//   alike: each rank writes the same graph, its cut edges fed with that rank's values from a
//   simulated eager replay of every rank (its reference, stored as the expected outputs too). A
//   candidate counts when the world's real run fails on the same rank the same way.
// - Stage bisection (unless --no-stage-bisect): the minimum run for real with the compile stages
//   before the backend (eager, aot_eager, and aot_eager_decomp_partition for Inductor); the first
//   that fails the same way is where the failure enters (summary "stages").
// - OUT holds world/ (the minimum, a multi-rank dir), repro.py (runs it under torchrun:
//   `torchrun --nproc-per-node W repro.py`; `parity repro run OUT/world` replays it simulated),
//   summary.json (the rank, the ops before and after, the collectives kept, the graph's text).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <iosfwd>

#include <string>

#include "distributed/replay.h"
#include "distributed/world.h"
#include "minifier/minify.h"

namespace parity::minifier {

// How a world's real run fails: on its first failing rank, the kind ("accuracy", "exception: "
// and the error's normalized first line) and that rank's first failing graph; kind "" where it
// passes or could not run at all (a candidate that cannot run is no failure). A crash or timeout
// of the ranks' processes is rank -1's "crash". Exposed for unit tests.
struct WorldFailure {
  int rank = -1;
  std::string kind;
  size_t graph = 0;
  bool Matches(const WorldFailure& o) const { return !kind.empty() && rank == o.rank && kind == o.kind; }
  std::string Describe() const {
    if (kind.empty()) return "passes";
    return (rank < 0 ? std::string("the ranks' processes") : "rank " + std::to_string(rank)) + ": " + kind;
  }
};
WorldFailure FailureOf(const Expected<distributed::WorldReport>& report);

// Whether every asynchronous collective's result (a `_c10d_functional` op's, wait_tensor aside) is
// read only through wait_tensor (directly, or through the getitems of a coalesced result), as
// PyTorch requires of a program: a candidate that reads or returns one unwaited is no program
// (aot_eager fails it where eager does not) and is not run. Exposed for unit tests.
bool CollectivesWaited(const ir::Graph& g);

// `ranks_tried`: the isolated ranks ranks.h tried first, for the summary's "world".
[[nodiscard]] Expected<MinifyResult> MinifyAcrossRanks(const MinifyOptions& options, const distributed::World& world,
                                                       const std::filesystem::path& out, const nlohmann::json& ranks_tried,
                                                       std::ostream& log);

}  // namespace parity::minifier
