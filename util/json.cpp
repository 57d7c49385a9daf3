#include "util/json.h"

namespace parity {

namespace {

// The deepest nesting of arrays and objects, strings skipped; stops counting past `limit`.
int Depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Expected<nlohmann::json> ParseJson(const std::string& text, const std::string& where, int max_depth) {
  if (Depth(text, max_depth) > max_depth)
    return Error::BadInput(where + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::BadInput(where + ": not valid JSON");
  return j;
}

}  // namespace parity
