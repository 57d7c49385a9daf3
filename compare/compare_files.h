// `parity compare`: same() over the tensors of two safetensors files, matched by name.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "compare/same.h"
#include "util/status.h"

namespace parity::compare {

struct CompareFilesOptions {
  SameOptions same;
  std::optional<std::filesystem::path> fp64_ref;
  std::map<std::string, double> tol_overrides;  // tensor name -> tol
};

struct FileComparison {
  bool pass = true;
  std::vector<std::pair<std::string, Verdict>> tensors;  // in REF's file order
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// BadInput when a file is malformed, or when RES (or the fp64 file) lacks a tensor of REF, or
// has tensors REF does not.
[[nodiscard]] Expected<FileComparison> CompareFiles(const std::filesystem::path& ref, const std::filesystem::path& res,
                                                    const CompareFilesOptions& options);

// "name=tol" -> {name, tol}; BadInput naming the flag on a malformed entry.
[[nodiscard]] Expected<std::pair<std::string, double>> ParseTolOverride(const std::string& spec);

// A fixed-width table of verdicts and stats, one line per output.
std::string VerdictTable(const std::vector<std::pair<std::string, Verdict>>& rows);

}  // namespace parity::compare
