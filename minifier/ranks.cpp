#include "minifier/ranks.h"

#include <chrono>
#include <fstream>
#include <ostream>

#include "distributed/isolate.h"
#include "minifier/across_ranks.h"

namespace parity::minifier {
namespace fs = std::filesystem;

Expected<MinifyResult> MinifyRanks(const MinifyOptions& opts, std::ostream& log) {
  PARITY_RETURN_IF_ERROR(opts.experiment.Check());
  PARITY_ASSIGN_OR_RETURN(distributed::World world, distributed::World::Load(opts.repro_dir));
  const fs::path out = opts.out_dir.empty() ? DefaultOutDir(opts.repro_dir) : opts.out_dir;
  const std::string device = opts.experiment.device.value_or(world.rank(0).manifest().device);
  // A collective waits for its members as long as half an experiment may take (as verify's worlds).
  const std::chrono::milliseconds wait{static_cast<int64_t>(opts.experiment.timeout_s) * 500};
  log << "minify: " << world.world_size() << " ranks; each isolated (its collectives' values from a simulated replay fed in)\n";
  PARITY_ASSIGN_OR_RETURN(auto isolated, distributed::IsolateRanks(world, device, wait, out / "isolated"));
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& iso : isolated) {
    log << "rank " << iso.rank << ": " << iso.collectives_cut << " collective nodes cut; minifying " << iso.dir.string() << "\n";
    MinifyOptions one = opts;
    one.repro_dir = iso.dir;
    one.out_dir = out / ("rank" + std::to_string(iso.rank));
    auto result = Minify(one, log);
    if (!result.ok()) {
      if (result.error().exception_type != kDoesNotFail) return result.error().With("rank " + std::to_string(iso.rank));
      log << "rank " << iso.rank << ": does not fail isolated: " << result.error().message << "\n";
      tried.push_back({{"rank", iso.rank}, {"fails", false}});
      continue;
    }
    tried.push_back({{"rank", iso.rank}, {"fails", true}});
    nlohmann::json summary = result->summary;
    summary["world"] = {{"dir", fs::absolute(opts.repro_dir).string()}, {"world_size", world.world_size()}, {"rank", iso.rank},
                        {"collectives_cut", iso.collectives_cut}, {"ranks_tried", tried}};
    std::ofstream(out / "summary.json") << summary.dump(1) << "\n";
    log << "minify: rank " << iso.rank << " of " << world.world_size() << " reduced alone: " << (out / ("rank" + std::to_string(iso.rank))).string() << "\n";
    return MinifyResult{summary};
  }
  // No rank fails alone: the failure needs the collectives themselves (a communication pass, a
  // bucketing); it is reduced on every rank at once, the collectives kept (across_ranks.h).
  log << "minify: no rank fails isolated\n";
  auto across = MinifyAcrossRanks(opts, world, out, tried, log);
  if (across.ok()) return across;
  Error e = across.error();
  if (e.kind == ErrorKind::kUnsupported) {  // the backend cannot run ranks for real
    e = Error::Runtime("the ranks together are reduced only with a backend that runs them for real: " + e.message);
    e.exception_type = kDoesNotFail;
  }
  if (e.exception_type != kDoesNotFail) return e;
  return e.With("no rank of " + opts.repro_dir.string() + " fails isolated (" + std::to_string(world.world_size()) + " ranks tried)");
}

}  // namespace parity::minifier
