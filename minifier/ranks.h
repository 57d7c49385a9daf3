// `parity minify` of a multi-rank dir (distributed/world.h). Each rank is isolated (its graphs'
// collectives cut, what they returned on that rank in a simulated replay of every rank fed in:
// distributed/isolate.h), then the first rank, in rank order, whose isolated dir fails with the
// backend is minified as any repro dir is: the minimum holds no collective, and its repro.py runs
// in one process. OUT holds isolated/rank<r>/ (every rank's), rank<r>/ (that rank's minify:
// minified/, repro.py, summary.json) and summary.json, the rank's summary with a "world" field:
// {dir, world_size, rank, collectives_cut, ranks_tried}. When no isolated rank fails, the failure
// needs the collectives themselves: the ranks are reduced together, the collectives kept
// (across_ranks.h), the summary's "world" then with reduced_across_ranks and ranks_tried.
#pragma once

#include <iosfwd>

#include "minifier/minify.h"

namespace parity::minifier {

[[nodiscard]] Expected<MinifyResult> MinifyRanks(const MinifyOptions& options, std::ostream& log);

}  // namespace parity::minifier
