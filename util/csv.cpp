#include "util/csv.h"

#include <algorithm>

#include "util/files.h"

namespace parity {

int CsvTable::Column(const std::string& name) const {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

Expected<CsvTable> ParseCsv(const std::string& text, const std::string& where) {
  CsvTable t;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, record_line = 1;
  auto end_record = [&]() -> Status {
    record.push_back(field);
    field.clear();
    const bool blank = record.size() == 1 && record[0].empty() && !any;
    if (!blank) {
      if (t.header.empty()) {
        t.header = record;
      } else if (record.size() != t.header.size()) {
        return Error::BadInput(where + ":" + std::to_string(record_line) + ": " + std::to_string(record.size()) +
                               " fields, the header has " + std::to_string(t.header.size()));
      } else {
        t.rows.push_back(record);
        t.lines.push_back(record_line);
      }
    }
    record.clear();
    any = false;
    return Status::Ok();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      PARITY_RETURN_IF_ERROR(end_record());
      record_line = ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) return Error::BadInput(where + ":" + std::to_string(record_line) + ": unterminated quoted field");
  if (!field.empty() || !record.empty() || any) PARITY_RETURN_IF_ERROR(end_record());
  if (t.header.empty()) return Error::BadInput(where + ": empty (no header line)");
  return t;
}

Expected<CsvTable> ReadCsv(const std::filesystem::path& file) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  return ParseCsv(text, file.string());
}

std::string CsvLine(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    const std::string& f = fields[i];
    if (f.find_first_of(",\"\n\r") == std::string::npos) {
      out += f;
      continue;
    }
    out += '"';
    for (char c : f) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    out += '"';
  }
  return out + "\n";
}

std::string CsvText(const CsvTable& t) {
  std::string out = CsvLine(t.header);
  for (const auto& r : t.rows) out += CsvLine(r);
  return out;
}

}  // namespace parity
