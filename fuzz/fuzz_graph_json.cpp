// The graph loader on arbitrary text: bounded JSON parsing, GraphFromJson (schema of nodes and
// arguments, Lint), then the printers. A graph that loads must survive a JSON round trip.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "repro/graph_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (auto graph = parity::fuzz::LoadGraphOrTrap(data, size)) (void)parity::ir::GraphToText(*graph, /*with_stack_traces=*/true);
  return 0;
}
