// The stable JSON form of a graph (docs/format.md) and the readable text form.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

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

// "float32" <-> c10::ScalarType::Float (torch's spelling).
[[nodiscard]] Expected<c10::ScalarType> ParseTorchDtype(const std::string& name);
std::string TorchDtypeName(c10::ScalarType t);
std::string ShortDtypeName(c10::ScalarType t);  // "f32", "bf16", "i64", ...

// The readable form: one line per node, stable for golden tests.
//   %add : f32[2, 3] = aten::add.Tensor(%x, %w, alpha=1)
std::string GraphToText(const Graph& g, bool with_stack_traces = false);
std::string ArgToText(const Arg& a);

}  // namespace parity::ir
