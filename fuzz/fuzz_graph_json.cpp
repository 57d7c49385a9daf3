// The graph loader on arbitrary text: bounded JSON parsing, GraphFromJson (schema of nodes and
// arguments, Lint), then the printers. A graph that loads must survive a JSON round trip.
#include <cstdint>
#include <string>

#include "repro/graph_json.h"
#include "repro/graph_text.h"
#include "util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto j = parity::ParseJson(text, "graph.json");
  if (!j.ok()) return 0;
  auto graph = parity::ir::GraphFromJson(*j, "graph.json");
  if (!graph.ok()) {
    if (graph.error().kind != parity::ErrorKind::kBadInput) __builtin_trap();
    return 0;
  }
  (void)parity::ir::GraphToText(*graph, /*with_stack_traces=*/true);
  auto again = parity::ir::GraphFromJson(parity::ir::GraphToJson(*graph), "round trip");
  if (!again.ok()) __builtin_trap();  // what the writer writes, the reader must read
  return 0;
}
