// Format-3 graphs with higher-order ops (cond, while_loop, scan, map, invoke_subgraph, ...), mutated
// by their structure rather than their bytes: an argument turned from a subgraph into a value or
// back, operands added or dropped, a subgraph's results changed, another op name, recorded meta
// changed, subgraphs nested deeper or renamed. What loads must hold what repro/hop_check.h says
// (the interpreter then compiles it: an error is bad input or unsupported, never a crash), and
// what does not load is bad input.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "interpreter/interpreter.h"

using nlohmann::json;

namespace {

// Every JSON object under `j` that is a node calling a higher-order op, and every subgraph.
void Collect(json& g, std::vector<json*>& hops, std::vector<json*>& graphs) {
  graphs.push_back(&g);
  if (g.contains("nodes") && g["nodes"].is_array())
    for (auto& n : g["nodes"])
      if (n.is_object() && n.contains("target") && n["target"].is_string() && n["target"].get<std::string>().rfind("hop::", 0) == 0)
        hops.push_back(&n);
  if (g.contains("subgraphs") && g["subgraphs"].is_object())
    for (auto& [name, s] : g["subgraphs"].items()) Collect(s, hops, graphs);
}

std::string AnyNodeName(const json& g, std::mt19937& rng) {
  std::vector<std::string> names;
  if (g.contains("nodes") && g["nodes"].is_array())
    for (const auto& n : g["nodes"])
      if (n.is_object() && n.contains("name") && n["name"].is_string() && n.value("op", "") != "output") names.push_back(n["name"]);
  return names.empty() ? "x" : names[rng() % names.size()];
}

// What a mutation works on: the whole graph, one of its graphs (the top or a subgraph) and one of
// its higher-order calls (null when it has none).
struct Target {
  json& top;
  json* g;
  json* h;
  std::mt19937& rng;
  json* HopArgs() const { return h && h->contains("args") && (*h)["args"].is_array() ? &(*h)["args"] : nullptr; }
  json* Nodes() const { return g->contains("nodes") && (*g)["nodes"].is_array() ? &(*g)["nodes"] : nullptr; }
};

// An argument's kind: a subgraph where a value was, a value where a subgraph was.
void SwapSlotKind(Target& t) {
  json* args = t.HopArgs();
  if (!args || args->empty()) return;
  json& a = (*args)[t.rng() % args->size()];
  if (a.is_object() && a.contains("subgraph"))
    a = json{{"node", AnyNodeName(*t.g, t.rng)}};
  else if (t.top.contains("subgraphs") && t.top["subgraphs"].is_object() && !t.top["subgraphs"].empty())
    a = json{{"subgraph", t.top["subgraphs"].begin().key()}};
  else
    a = "text";
}

// Operands added or dropped (the first list argument).
void ChangeOperands(Target& t) {
  json* args = t.HopArgs();
  if (!args) return;
  for (auto& a : *args)
    if (a.is_array()) {
      if (!a.empty() && t.rng() % 2)
        a.erase(a.begin() + static_cast<std::ptrdiff_t>(t.rng() % a.size()));
      else
        a.push_back(json{{"node", AnyNodeName(*t.g, t.rng)}});
      return;
    }
}

// Another op name.
void ChangeOp(Target& t) {
  static const char* kOps[] = {"hop::cond", "hop::while_loop", "hop::scan", "hop::map_impl", "hop::associative_scan",
                               "hop::invoke_subgraph", "hop::tag_activation_checkpoint", "hop::flex_attention", "hop::unknown"};
  if (t.h) (*t.h)["target"] = kOps[t.rng() % (sizeof kOps / sizeof *kOps)];
}

// The arguments cut short or lengthened.
void ChangeArity(Target& t) {
  json* args = t.HopArgs();
  if (!args) return;
  if (!args->empty() && t.rng() % 2)
    args->erase(args->end() - 1);
  else
    args->push_back(json::array());
}

// A subgraph's results: one more, one fewer.
void ChangeResults(Target& t) {
  json* nodes = t.Nodes();
  if (!nodes) return;
  for (auto& n : *nodes)
    if (n.is_object() && n.value("op", "") == "output" && n.contains("args") && n["args"].is_array() && !n["args"].empty() &&
        n["args"][0].is_array()) {
      if (!n["args"][0].empty() && t.rng() % 2)
        n["args"][0].erase(n["args"][0].end() - 1);
      else
        n["args"][0].push_back(json{{"node", AnyNodeName(*t.g, t.rng)}});
    }
}

// Recorded meta: another dtype or shape.
void ChangeMeta(Target& t) {
  static const char* kDtypes[] = {"float32", "bool", "int64", "bfloat16", "float64"};
  json* nodes = t.Nodes();
  if (!nodes || nodes->empty()) return;
  json& n = (*nodes)[t.rng() % nodes->size()];
  if (!n.is_object() || !n.contains("meta") || !n["meta"].is_object() || !n["meta"].contains("val") || !n["meta"]["val"].is_array() ||
      n["meta"]["val"].empty() || !n["meta"]["val"][0].is_object())
    return;
  json& v = n["meta"]["val"][0];
  if (t.rng() % 2) {
    v["dtype"] = kDtypes[t.rng() % (sizeof kDtypes / sizeof *kDtypes)];
  } else {
    v["shape"] = json::array({static_cast<int>(t.rng() % 5), static_cast<int>(t.rng() % 5)});
    v["stride"] = json::array({1, 1});
  }
}

// A subgraph nested one level deeper (its own nodes as a subgraph of itself).
void NestDeeper(Target& t) {
  if (!t.top.contains("subgraphs") || !t.top["subgraphs"].is_object() || t.top["subgraphs"].empty()) return;
  json& s = t.top["subgraphs"].begin().value();
  if (s.is_object()) s["subgraphs"] = json{{"nested", json{{"nodes", s.value("nodes", json::array())}}}};
}

// A reference to a subgraph that is not there.
void NameMissingSubgraph(Target& t) {
  json* args = t.HopArgs();
  if (!args) return;
  for (auto& a : *args)
    if (a.is_object() && a.contains("subgraph")) {
      a["subgraph"] = "missing";
      return;
    }
}

// The while loop's recorded iterations (negative, zero, one).
void ChangeIterations(Target& t) {
  if (t.h) (*t.h)["meta"]["iterations"] = static_cast<int>(t.rng() % 3) - 1;
}

constexpr void (*kMutations[])(Target&) = {SwapSlotKind, ChangeOperands, ChangeOp,   ChangeArity,         ChangeResults,
                                           ChangeMeta,   NestDeeper,     NameMissingSubgraph, ChangeIterations};

void Mutate(json& top, std::mt19937& rng) {
  std::vector<json*> hops, graphs;
  Collect(top, hops, graphs);
  Target t{top, graphs[rng() % graphs.size()], hops.empty() ? nullptr : hops[rng() % hops.size()], rng};
  kMutations[rng() % (sizeof kMutations / sizeof *kMutations)](t);
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  auto j = json::parse(std::string(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return size;
  std::mt19937 rng(seed);
  Mutate(j, rng);
  const std::string out = j.dump();
  if (out.size() > max_size) return size;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto graph = parity::fuzz::LoadGraphOrTrap(data, size);
  if (!graph) return 0;
  auto program = parity::interp::Program::Compile(*graph, "graph.json");
  if (!program.ok() && program.error().kind != parity::ErrorKind::kBadInput && program.error().kind != parity::ErrorKind::kUnsupported)
    __builtin_trap();
  return 0;
}
