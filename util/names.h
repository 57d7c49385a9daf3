// Enum <-> name tables: one table per enum, looked up both ways. Nothing parity-specific.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace parity {

// The name of `value` in `table` ({value, name} pairs), or "?".
template <typename E, size_t N>
const char* NameIn(const std::pair<E, const char*> (&table)[N], E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

// The value named `name` in `table`, if any.
template <typename E, size_t N>
std::optional<E> ValueIn(const std::pair<E, const char*> (&table)[N], const std::string& name) {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

}  // namespace parity
