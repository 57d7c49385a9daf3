// JSON from files users give: bounded nesting (a value nested deeper than `max_depth` is
// refused before parsing, so no later copy or walk can overflow the stack) and parse errors as
// kBadInput naming the file. Nothing parity-specific.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "util/status.h"

namespace parity {

inline constexpr int kMaxJsonDepth = 200;

// `where` names the text in errors ("path/manifest.json", "results.jsonl:12").
[[nodiscard]] Expected<nlohmann::json> ParseJson(const std::string& text, const std::string& where,
                                                 int max_depth = kMaxJsonDepth);

}  // namespace parity
