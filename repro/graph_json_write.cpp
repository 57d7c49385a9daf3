#include "repro/graph_json.h"

#include <cmath>

#include "repro/dtypes.h"

// Writing the JSON form (docs/format.md), the inverse of graph_json_read.cpp.
namespace parity::ir {
using nlohmann::json;

json ArgToJson(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::kNone: return nullptr;
    case Arg::Kind::kBool: return a.b;
    case Arg::Kind::kInt: return a.i;
    case Arg::Kind::kFloat:
      if (std::isnan(a.f)) return {{"float", "nan"}};
      if (std::isinf(a.f)) return {{"float", a.f > 0 ? "inf" : "-inf"}};
      return a.f;  // nlohmann writes 1.0 as "1.0", so it reads back as a float
    case Arg::Kind::kString: return a.s;
    case Arg::Kind::kNode: return {{"node", a.node->name()}};
    case Arg::Kind::kList: {
      json arr = json::array();
      for (const auto& x : a.list) arr.push_back(ArgToJson(x));
      return arr;
    }
    case Arg::Kind::kDtype: return {{"dtype", TorchDtypeName(a.dtype)}};
    case Arg::Kind::kDevice: return {{"device", a.device.str()}};
    case Arg::Kind::kLayout: return {{"layout", a.layout == c10::kStrided ? "strided" : "sparse_coo"}};
    case Arg::Kind::kMemoryFormat:
      switch (a.memory_format) {
        case c10::MemoryFormat::Preserve: return {{"memory_format", "preserve_format"}};
        case c10::MemoryFormat::ChannelsLast: return {{"memory_format", "channels_last"}};
        case c10::MemoryFormat::ChannelsLast3d: return {{"memory_format", "channels_last_3d"}};
        default: return {{"memory_format", "contiguous_format"}};
      }
    case Arg::Kind::kSubgraph: return {{"subgraph", a.s}};
    case Arg::Kind::kDict: {
      json d = json::object();
      for (size_t k = 0; k < a.keys.size(); ++k) d[a.keys[k]] = ArgToJson(a.list[k]);
      return {{"dict", d}};
    }
  }
  return nullptr;
}

namespace {

json MetaToJson(const std::optional<TensorMeta>& m) {
  if (!m) return nullptr;
  json j = {{"dtype", TorchDtypeName(m->dtype)}, {"shape", m->shape}, {"stride", m->stride}};
  if (m->symbolic()) {
    json dims = json::array();
    for (const auto& d : m->sym_shape) dims.push_back(d.empty() ? json(nullptr) : json(d));
    j["sym_shape"] = dims;
  }
  return j;
}

json NodesToJson(const Graph& g);

// {"nodes": [...], "subgraphs": {...}} of each subgraph, recursively.
json SubgraphsToJson(const Graph& g) {
  json subs = json::object();
  for (const auto& [name, sg] : g.subgraphs) {
    json js = {{"nodes", NodesToJson(*sg)}};
    if (!sg->subgraphs.empty()) js["subgraphs"] = SubgraphsToJson(*sg);
    subs[name] = js;
  }
  return subs;
}

json NodesToJson(const Graph& g) {
  json nodes = json::array();
  for (const Node* n : g.nodes()) {
    json jn = {{"name", n->name()}, {"op", ToString(n->kind())}};
    if (n->kind() != NodeKind::kOutput) jn["target"] = n->target();
    if (!n->args.empty() || n->kind() == NodeKind::kOutput) {
      json args = json::array();
      for (const auto& a : n->args) args.push_back(ArgToJson(a));
      jn["args"] = args;
    }
    if (!n->kwargs.empty()) {
      json kw = json::object();
      for (const auto& [k, a] : n->kwargs) kw[k] = ArgToJson(a);
      jn["kwargs"] = kw;
    }
    json meta = json::object();
    if (!n->meta.empty()) {
      json vals = json::array();
      for (const auto& m : n->meta) vals.push_back(MetaToJson(m));
      meta["val"] = vals;
    }
    if (!n->sym.empty()) {
      meta["sym"] = n->sym;
      if (n->sym_type != "int") meta["sym_type"] = n->sym_type;
    }
    if (!n->stack_trace.empty()) meta["stack_trace"] = n->stack_trace;
    if (!n->module_path.empty()) meta["module_path"] = n->module_path;
    if (n->iterations) meta["iterations"] = *n->iterations;
    if (!meta.empty()) jn["meta"] = meta;
    nodes.push_back(std::move(jn));
  }
  return nodes;
}
}  // namespace

json GraphToJson(const Graph& g) {
  json out = {{"format", "parity.graph"}, {"version", kGraphFormatVersion}, {"name", g.name()}, {"nodes", NodesToJson(g)}};
  if (!g.subgraphs.empty()) out["subgraphs"] = SubgraphsToJson(g);
  if (g.symbolic()) {
    json syms = json::object();
    for (const auto& [name, s] : g.symbols)
    {
      syms[name] = {{"hint", s.float_hint ? json(*s.float_hint) : json(s.hint)},
                    {"min", s.min == ir::kUnboundedBelow ? json(nullptr) : json(s.min)}, {"max", s.max ? json(*s.max) : json(nullptr)}};
      if (s.unbacked) syms[name]["unbacked"] = true;
    }
    out["symbols"] = syms;
    out["guards"] = g.guards;
  }
  return out;
}

}  // namespace parity::ir
