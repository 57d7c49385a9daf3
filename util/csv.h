// CSV as the dynamo runner and pandas write it (RFC 4180: comma-separated, fields with a comma,
// quote or newline inside double quotes, quotes doubled). Nothing parity-specific.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as wide as the header
  std::vector<int> lines;                      // the line each row starts on (1-based), for errors
  // The column named `name`, or -1.
  int Column(const std::string& name) const;
};

// A table from `text` (`where` names it in errors: a row wider or narrower than the header, an
// unterminated quote). Blank lines are skipped; a trailing '\r' is dropped.
[[nodiscard]] Expected<CsvTable> ParseCsv(const std::string& text, const std::string& where);
[[nodiscard]] Expected<CsvTable> ReadCsv(const std::filesystem::path& file);

// One line (with '\n'), quoting the fields that need it.
std::string CsvLine(const std::vector<std::string>& fields);
std::string CsvText(const CsvTable& table);

}  // namespace parity
