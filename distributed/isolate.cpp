#include "distributed/isolate.h"

#include <optional>
#include <set>
#include <thread>

#include "distributed/simulated.h"
#include "interpreter/interpreter.h"
#include "repro/safetensors.h"
#include "util/files.h"

namespace parity::distributed {
namespace fs = std::filesystem;

namespace {

bool IsCollective(const ir::Node& n) {
  if (n.kind() != ir::NodeKind::kCallFunction) return false;
  return interp::IsCollective(n.OperatorName().first);
}

// The first collective node inside a subgraph of `g` (at any depth), or nullptr.
const ir::Node* CollectiveInSubgraph(const ir::Graph& g) {
  for (const auto& [name, sub] : g.subgraphs) {
    for (const ir::Node* n : sub->nodes())
      if (IsCollective(*n)) return n;
    if (const ir::Node* n = CollectiveInSubgraph(*sub)) return n;
  }
  return nullptr;
}

// Rank r's graph `entry` without its collectives: the collective nodes and the getitems of their
// results cut; whatever a remaining node read from them is a placeholder of the same name. What a
// collective read (its tensor operands computed on this rank) is returned too, after the graph's
// own outputs (`sent`, in graph order): the rank's computation up to each collective is checked,
// also where the graph's outputs come only from collectives.
Expected<ir::Graph> CutCollectives(const GraphEntry& entry, const std::unordered_map<std::string, c10::IValue>& values,
                                   int& cut, std::vector<std::string>& sent) {
  std::set<const ir::Node*> collectives;
  for (const ir::Node* n : entry.graph.nodes())
    if (IsCollective(*n)) collectives.insert(n);
  std::set<std::string> keep;
  for (const ir::Node* n : entry.graph.nodes()) {
    if (n->kind() == ir::NodeKind::kOutput || collectives.count(n)) continue;
    if (n->kind() == ir::NodeKind::kCallFunction && n->target() == ir::kGetItem && collectives.count(n->args[0].node)) continue;
    keep.insert(n->name());
  }
  std::vector<std::string> outputs;
  for (const ir::Node* o : entry.graph.OutputValues()) outputs.push_back(o->name());
  std::set<std::string> listed(outputs.begin(), outputs.end());
  for (const ir::Node* c : entry.graph.nodes()) {
    if (!collectives.count(c)) continue;
    for (const ir::Arg& a : c->args)
      a.ForEachRef([&](const ir::Node* in) {
        auto v = values.find(in->name());
        if (!keep.count(in->name()) || in->kind() != ir::NodeKind::kCallFunction || v == values.end() || !v->second.isTensor()) return;
        if (listed.insert(in->name()).second) sent.push_back(in->name());
      });
  }
  outputs.insert(outputs.end(), sent.begin(), sent.end());
  cut = static_cast<int>(collectives.size());
  return entry.graph.Extract(keep, outputs);
}

// The nodes whose values the isolation reads (RunOptions::record): the collectives, the getitems
// of their results and the op nodes they read. Recording only these, not every node, keeps a rank's
// replay to the boundary it is cut at.
std::vector<std::string> BoundaryNodes(const ir::Graph& g) {
  std::set<std::string> names;
  for (const ir::Node* n : g.nodes()) {
    const bool item_of_collective = n->kind() == ir::NodeKind::kCallFunction && n->target() == ir::kGetItem &&
                                    n->args[0].node != nullptr && IsCollective(*n->args[0].node);
    if (!IsCollective(*n) && !item_of_collective) continue;
    names.insert(n->name());
    for (const ir::Arg& a : n->args)
      a.ForEachRef([&](const ir::Node* in) {
        if (in->kind() == ir::NodeKind::kCallFunction) names.insert(in->name());  // what CutCollectives may return
      });
  }
  return {names.begin(), names.end()};
}

using RankValues = std::vector<std::unordered_map<std::string, c10::IValue>>;

// Every graph of rank r, in order, its collectives simulated, the values kept (all, or the
// collectives' boundary).
Expected<RankValues> RunRank(const World& world, int r, SimulatedWorld& sim, const std::string& device, bool every_node) {
  const ReproDir& repro = world.rank(r);
  RankValues out;
  for (const GraphEntry& entry : repro.graphs()) {
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(entry.graph, (repro.root() / entry.file).string()));
    interp::RunOptions ro;
    ro.device = c10::Device(device);
    if (every_node)
      ro.record_all = true;
    else
      ro.record = BoundaryNodes(entry.graph);
    ro.collectives = sim.Rank(r);
    PARITY_ASSIGN_OR_RETURN(auto inputs, repro.Inputs(entry));
    PARITY_ASSIGN_OR_RETURN(auto attrs, repro.Attrs(entry));
    PARITY_ASSIGN_OR_RETURN(auto run, program.Run(inputs, attrs, ro));
    out.push_back(std::move(run.values));
  }
  return out;
}

Expected<IsolatedRank> WriteIsolated(const World& world, int r, const RankValues& values, const fs::path& dir) {
  const ReproDir& repro = world.rank(r);
  IsolatedRank iso{r, dir, 0};
  std::vector<GraphEntry> entries;
  PARITY_ASSIGN_OR_RETURN(auto tensors, safetensors::LoadAll(repro.root() / repro.manifest().tensors_file));
  for (size_t gi = 0; gi < repro.graphs().size(); ++gi) {
    const GraphEntry& entry = repro.graphs()[gi];
    int cut = 0;
    std::vector<std::string> sent;
    PARITY_ASSIGN_OR_RETURN(ir::Graph g, CutCollectives(entry, values[gi], cut, sent));
    iso.collectives_cut += cut;
    GraphEntry e;
    e.name = entry.name;
    e.file = entry.file;
    e.inputs = entry.inputs;
    e.expected_outputs = entry.expected_outputs;
    e.output_names = entry.output_names;
    e.mode = entry.mode;
    e.dtype = entry.dtype;
    e.device = entry.device;
    e.amp = entry.amp;
    e.tangents = entry.tangents;
    e.requires_grad = entry.requires_grad;
    e.extra = entry.extra;
    const bool named = !e.output_names.empty() && e.output_names.size() == e.expected_outputs.size();
    for (const std::string& name : sent) {  // eager's value of each, as the replay computed it; no gradient fed
      const std::string key = "isolated/" + entry.name + "/sent/" + name;
      e.expected_outputs.push_back(key);
      if (named) e.output_names.push_back("sent/" + name);
      if (!e.tangents.empty()) e.tangents.push_back("");
      tensors.emplace_back(key, values[gi].at(name).toTensor().detach().to(at::kCPU).contiguous());
    }
    for (const ir::Node* n : g.nodes()) {
      if (n->kind() != ir::NodeKind::kPlaceholder || entry.inputs.count(n->name()) || !n->sym.empty()) continue;
      auto v = values[gi].find(n->name());
      if (v == values[gi].end() || !v->second.isTensor())
        return Error::BadInput((repro.root() / entry.file).string() + ": node \"" + n->name() +
                               "\" (read from a collective) has no tensor value in the simulated replay");
      const std::string key = "isolated/" + entry.name + "/" + n->name();
      e.inputs[n->name()] = key;
      tensors.emplace_back(key, v->second.toTensor().detach().to(at::kCPU).contiguous());
    }
    e.graph = std::move(g);
    entries.push_back(std::move(e));
  }
  Manifest m = repro.manifest();
  m.extra.erase("distributed");
  m.tensors_sha256.clear();
  m.failure = nullptr;
  m.extra["isolated_from"] = {{"world", fs::absolute(world.root()).string()}, {"rank", r}, {"collectives_cut", iso.collectives_cut}};
  std::vector<const GraphEntry*> ptrs;
  for (const auto& e : entries) ptrs.push_back(&e);
  RemoveAll(dir);
  PARITY_RETURN_IF_ERROR(WriteReproDir(dir, m, ptrs, tensors));
  return iso;
}

}  // namespace

Expected<std::vector<IsolatedRank>> IsolateRanks(const World& world, const std::string& device, std::chrono::milliseconds timeout,
                                                 const fs::path& out) {
  const int n = world.world_size();
  for (int r = 0; r < n; ++r)
    for (const GraphEntry& entry : world.rank(r).graphs())
      if (const ir::Node* c = CollectiveInSubgraph(entry.graph))
        return Error::BadInput((world.rank(r).root() / entry.file).string() + ": collective \"" + c->name() +
                               "\" inside a subgraph: isolating a rank cuts only its graphs' own collectives");
  PARITY_ASSIGN_OR_RETURN(ReplayValues values, SimulatedValues(world, device, timeout, false));
  std::vector<IsolatedRank> isolated;
  for (int r = 0; r < n; ++r) {
    PARITY_ASSIGN_OR_RETURN(IsolatedRank iso, WriteIsolated(world, r, values[static_cast<size_t>(r)], out / ("rank" + std::to_string(r))));
    isolated.push_back(std::move(iso));
  }
  return isolated;
}

Expected<ReplayValues> SimulatedValues(const World& world, const std::string& device, std::chrono::milliseconds timeout,
                                       bool every_node) {
  const int n = world.world_size();
  SimulatedWorld sim(n, world.groups(), timeout);
  std::vector<std::optional<Expected<RankValues>>> runs(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      runs[static_cast<size_t>(r)].emplace(RunRank(world, r, sim, device, every_node));
      sim.Finished(r);
    });
  for (auto& t : threads) t.join();
  ReplayValues values;
  for (int r = 0; r < n; ++r) {
    auto& run = *runs[static_cast<size_t>(r)];
    if (!run.ok()) return run.error().With("rank " + std::to_string(r) + " (simulated replay)");
    values.push_back(std::move(*run));
  }
  return values;
}

}  // namespace parity::distributed
