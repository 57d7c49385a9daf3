// Shared by the fuzz targets: the scratch files an input is written to so that it goes through
// the same open/mmap/read path a user's file does. One directory per fuzzer process.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "repro/graph_json.h"
#include "util/json.h"

namespace parity::fuzz {

// $TMPDIR/parity-fuzz-<pid>/, created on first use and reused by every input of this process.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d =
        std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / ("parity-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Replaces `path` with exactly the input bytes.
inline void WriteBytes(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// The graph loader's contract on any text: what does not load is bad input (anything else
// traps); what loads reads back from what the writer writes (else traps). The graph, if it loaded.
inline std::optional<parity::ir::Graph> LoadGraphOrTrap(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto j = parity::ParseJson(text, "graph.json");
  if (!j.ok()) return std::nullopt;
  auto graph = parity::ir::GraphFromJson(*j, "graph.json");
  if (!graph.ok()) {
    if (graph.error().kind != parity::ErrorKind::kBadInput) __builtin_trap();
    return std::nullopt;
  }
  if (!parity::ir::GraphFromJson(parity::ir::GraphToJson(*graph), "round trip").ok()) __builtin_trap();
  return std::move(*graph);
}

}  // namespace parity::fuzz
