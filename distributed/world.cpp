#include "distributed/world.h"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace parity::distributed {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Expected<json> ReadJson(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return Error::BadInput(file.string() + ": cannot read it");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::BadInput(file.string() + ": not valid JSON");
  if (!j.is_object()) return Error::BadInput(file.string() + ": not a JSON object");
  return j;
}

// A rank dir's name from "ranks": relative, inside the multi-rank dir.
Status CheckRankPath(const std::string& name, const std::string& where) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute()) return Error::BadInput(where + " is not a relative path");
  for (const auto& part : p)
    if (part == "..") return Error::BadInput(where + " leaves the multi-rank dir (\"..\")");
  return Status::Ok();
}

// Rank r's "distributed" field: its rank, the world size, and its process groups merged into `groups`.
Status ReadRankField(const ReproDir& dir, int r, int world, std::map<std::string, std::vector<int>>& groups,
                     std::map<std::string, std::string>& named_by) {
  const std::string mw = (dir.root() / "manifest.json").string();
  const json& extra = dir.manifest().extra;
  if (!extra.contains("distributed") || !extra["distributed"].is_object())
    return Error::BadInput(mw + ": field \"distributed\" is missing (a rank of a multi-rank dir records it)");
  const json& d = extra["distributed"];
  if (!d.contains("rank") || !d["rank"].is_number_integer() || d["rank"].get<int64_t>() != r)
    return Error::BadInput(mw + ": field \"distributed.rank\" is not " + std::to_string(r) + ", its place in \"ranks\"");
  if (!d.contains("world_size") || !d["world_size"].is_number_integer() || d["world_size"].get<int64_t>() != world)
    return Error::BadInput(mw + ": field \"distributed.world_size\" is not " + std::to_string(world));
  if (!d.contains("process_groups")) return Status::Ok();
  if (!d["process_groups"].is_object()) return Error::BadInput(mw + ": field \"distributed.process_groups\" is not an object");
  for (const auto& [name, members] : d["process_groups"].items()) {
    const std::string gw = mw + ": field \"distributed.process_groups." + name + "\"";
    if (!members.is_array() || members.empty()) return Error::BadInput(gw + " is not a non-empty array of ranks");
    std::vector<int> ranks;
    std::set<int> seen;
    for (const auto& m : members) {
      if (!m.is_number_integer() || m.get<int64_t>() < 0 || m.get<int64_t>() >= world)
        return Error::BadInput(gw + " holds " + m.dump() + ", not a rank below the world size " + std::to_string(world));
      if (!seen.insert(m.get<int>()).second) return Error::BadInput(gw + " names rank " + m.dump() + " twice");
      ranks.push_back(m.get<int>());
    }
    auto [it, fresh] = groups.emplace(name, ranks);
    if (!fresh && it->second != ranks)
      return Error::BadInput(gw + " is " + members.dump() + ", but " + named_by[name] + " records " + json(it->second).dump());
    if (fresh) named_by[name] = mw;
  }
  return Status::Ok();
}

}  // namespace

bool World::IsWorldDir(const fs::path& dir) {
  auto j = ReadJson(dir / "manifest.json");
  return j.ok() && j->contains("format") && (*j)["format"] == kWorldFormat;
}

Expected<World> World::Load(const fs::path& dir) {
  const std::string mw = (dir / "manifest.json").string();
  PARITY_ASSIGN_OR_RETURN(json j, ReadJson(dir / "manifest.json"));
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kWorldFormatVersion)
    return Error::BadInput(mw + ": field \"version\" is " + (j.contains("version") ? j["version"].dump() : "missing") +
                           "; this parity reads multi-rank dirs of version " + std::to_string(kWorldFormatVersion));
  if (!j.contains("world_size") || !j["world_size"].is_number_integer() || j["world_size"].get<int64_t>() < 1)
    return Error::BadInput(mw + ": field \"world_size\" is not a positive integer");
  const int world = j["world_size"].get<int>();
  if (!j.contains("ranks") || !j["ranks"].is_array() || static_cast<int>(j["ranks"].size()) != world)
    return Error::BadInput(mw + ": field \"ranks\" is not an array of " + std::to_string(world) + " rank dirs");
  World w;
  w.root_ = dir;
  std::map<std::string, std::string> named_by;
  for (int r = 0; r < world; ++r) {
    const json& name = j["ranks"][static_cast<size_t>(r)];
    const std::string where = mw + ": field \"ranks[" + std::to_string(r) + "]\"";
    if (!name.is_string()) return Error::BadInput(where + " is not a string");
    PARITY_RETURN_IF_ERROR(CheckRankPath(name.get<std::string>(), where));
    PARITY_ASSIGN_OR_RETURN(ReproDir rank, ReproDir::Load(dir / name.get<std::string>()));
    PARITY_RETURN_IF_ERROR(ReadRankField(rank, r, world, w.groups_, named_by));
    w.ranks_.push_back(std::move(rank));
  }
  return w;
}

}  // namespace parity::distributed
