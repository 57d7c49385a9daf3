// The stable JSON form of a graph (docs/format.md): read (graph_json_read.cpp, every field
// checked) and written (graph_json_write.cpp). The readable text form is graph_text.h.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "repro/dtypes.h"
#include "repro/graph.h"
#include "util/status.h"

namespace parity::ir {

// Version 2 adds symbolic graphs (symbols, guards, sym_shape, sym); version 3 subgraphs (the
// higher-order ops' branches and bodies: "subgraphs", {"subgraph": name} and {"dict": {...}}
// arguments); versions 1 and 2 load as they are.
inline constexpr int kGraphFormatVersion = 3;
inline constexpr int kOldestGraphFormatVersion = 1;

// Parses a graph. `where` names the source (a file path) in error messages.
[[nodiscard]] Expected<Graph> GraphFromJson(const nlohmann::json& j, const std::string& where);
nlohmann::json GraphToJson(const Graph& g);
// One argument as the format writes it (docs/format.md "args").
nlohmann::json ArgToJson(const Arg& a);

}  // namespace parity::ir
