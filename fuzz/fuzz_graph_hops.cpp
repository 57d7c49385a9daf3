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

#include "interpreter/interpreter.h"
#include "repro/graph_json.h"
#include "util/json.h"

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

void Mutate(json& top, std::mt19937& rng) {
  std::vector<json*> hops, graphs;
  Collect(top, hops, graphs);
  static const char* kOps[] = {"hop::cond", "hop::while_loop", "hop::scan", "hop::map_impl", "hop::associative_scan",
                               "hop::invoke_subgraph", "hop::tag_activation_checkpoint", "hop::flex_attention", "hop::unknown"};
  static const char* kDtypes[] = {"float32", "bool", "int64", "bfloat16", "float64"};
  json* g = graphs[rng() % graphs.size()];
  json* h = hops.empty() ? nullptr : hops[rng() % hops.size()];
  switch (rng() % 9) {
    case 0:  // an argument's kind: a subgraph where a value was, a value where a subgraph was
      if (h && h->contains("args") && (*h)["args"].is_array() && !(*h)["args"].empty()) {
        json& a = (*h)["args"][rng() % (*h)["args"].size()];
        if (a.is_object() && a.contains("subgraph"))
          a = json{{"node", AnyNodeName(*g, rng)}};
        else if (top.contains("subgraphs") && top["subgraphs"].is_object() && !top["subgraphs"].empty())
          a = json{{"subgraph", top["subgraphs"].begin().key()}};
        else
          a = "text";
      }
      break;
    case 1:  // operands added or dropped
      if (h && h->contains("args") && (*h)["args"].is_array())
        for (auto& a : (*h)["args"])
          if (a.is_array()) {
            if (!a.empty() && rng() % 2)
              a.erase(a.begin() + static_cast<std::ptrdiff_t>(rng() % a.size()));
            else
              a.push_back(json{{"node", AnyNodeName(*g, rng)}});
            break;
          }
      break;
    case 2:  // another op
      if (h) (*h)["target"] = kOps[rng() % (sizeof kOps / sizeof *kOps)];
      break;
    case 3:  // the arguments cut short or lengthened
      if (h && h->contains("args") && (*h)["args"].is_array()) {
        if (!(*h)["args"].empty() && rng() % 2)
          (*h)["args"].erase((*h)["args"].end() - 1);
        else
          (*h)["args"].push_back(json::array());
      }
      break;
    case 4:  // a subgraph's results: one more, one fewer
      if (g->contains("nodes") && (*g)["nodes"].is_array())
        for (auto& n : (*g)["nodes"])
          if (n.is_object() && n.value("op", "") == "output" && n.contains("args") && n["args"].is_array() && !n["args"].empty() &&
              n["args"][0].is_array()) {
            if (!n["args"][0].empty() && rng() % 2)
              n["args"][0].erase(n["args"][0].end() - 1);
            else
              n["args"][0].push_back(json{{"node", AnyNodeName(*g, rng)}});
          }
      break;
    case 5:  // recorded meta: another dtype or shape
      if (g->contains("nodes") && (*g)["nodes"].is_array() && !(*g)["nodes"].empty()) {
        json& n = (*g)["nodes"][rng() % (*g)["nodes"].size()];
        if (n.is_object() && n.contains("meta") && n["meta"].is_object() && n["meta"].contains("val") && n["meta"]["val"].is_array() &&
            !n["meta"]["val"].empty() && n["meta"]["val"][0].is_object()) {
          json& v = n["meta"]["val"][0];
          if (rng() % 2)
            v["dtype"] = kDtypes[rng() % (sizeof kDtypes / sizeof *kDtypes)];
          else
            v["shape"] = json::array({static_cast<int>(rng() % 5), static_cast<int>(rng() % 5)}), v["stride"] = json::array({1, 1});
        }
      }
      break;
    case 6:  // a subgraph nested one level deeper (the whole graph as a subgraph of itself)
      if (top.contains("subgraphs") && top["subgraphs"].is_object() && !top["subgraphs"].empty()) {
        json& s = top["subgraphs"].begin().value();
        if (s.is_object()) s["subgraphs"] = json{{"nested", json{{"nodes", s.value("nodes", json::array())}}}};
      }
      break;
    case 7:  // a reference to a subgraph that is not there
      if (h && h->contains("args") && (*h)["args"].is_array())
        for (auto& a : (*h)["args"])
          if (a.is_object() && a.contains("subgraph")) {
            a["subgraph"] = "missing";
            break;
          }
      break;
    default:  // the while loop's recorded iterations
      if (h) (*h)["meta"]["iterations"] = static_cast<int>(rng() % 3) - 1;
      break;
  }
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
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto j = parity::ParseJson(text, "graph.json");
  if (!j.ok()) return 0;
  auto graph = parity::ir::GraphFromJson(*j, "graph.json");
  if (!graph.ok()) {
    if (graph.error().kind != parity::ErrorKind::kBadInput) __builtin_trap();
    return 0;
  }
  auto program = parity::interp::Program::Compile(*graph, "graph.json");
  if (!program.ok() && program.error().kind != parity::ErrorKind::kBadInput && program.error().kind != parity::ErrorKind::kUnsupported)
    __builtin_trap();
  auto again = parity::ir::GraphFromJson(parity::ir::GraphToJson(*graph), "round trip");
  if (!again.ok()) __builtin_trap();  // what the writer writes, the reader must read
  return 0;
}
