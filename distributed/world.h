// A multi-rank repro dir: what a distributed program's capture writes, one repro dir per rank
// (docs/format.md, "Distributed programs"). Its manifest.json:
//   {"format": "parity.distributed", "version": 1, "world_size": W, "ranks": ["rank0", ..., "rankW-1"]}
// and each rank's dir a repro dir of its own whose manifest holds
//   "distributed": {"rank": r, "world_size": W, "process_groups": {"<group name>": [global ranks in group order]}}
// naming the groups its graphs' collectives use. Loading reads every rank's dir once and checks
// that the ranks agree (world size, each rank in its place, one membership per group name).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::distributed {

inline constexpr const char* kWorldFormat = "parity.distributed";
inline constexpr int kWorldFormatVersion = 1;

class World {
 public:
  // Whether `dir`'s manifest.json says it is a multi-rank dir (a plain repro dir, a missing or
  // unreadable manifest: false, and the repro dir's loader reports what is wrong).
  static bool IsWorldDir(const std::filesystem::path& dir);
  // BadInput naming the file and field: a malformed top manifest, a rank dir that does not load
  // or disagrees (its rank, the world size, a group's members).
  [[nodiscard]] static Expected<World> Load(const std::filesystem::path& dir);

  const std::filesystem::path& root() const { return root_; }
  int world_size() const { return static_cast<int>(ranks_.size()); }
  const ReproDir& rank(int r) const { return ranks_.at(static_cast<size_t>(r)); }
  // Every rank's dir, in rank order, moved out: the world is left without ranks.
  std::vector<ReproDir> TakeRanks() && { return std::move(ranks_); }
  // Group name -> its members' global ranks, in group order (a member's index is its group rank).
  const std::map<std::string, std::vector<int>>& groups() const { return groups_; }

 private:
  std::filesystem::path root_;
  std::vector<ReproDir> ranks_;
  std::map<std::string, std::vector<int>> groups_;
};

}  // namespace parity::distributed
