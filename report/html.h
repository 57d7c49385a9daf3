// `parity report RESULTS... -o report.html`: the experiments of results files (a results.jsonl,
// or the output dir holding it; a gate.json beside it adds the verdicts), and minify runs (an
// OUT dir of `parity minify`, or its summary.json: the culprit and the divergence map) rendered into one
// self-contained HTML file by the Python renderer (tools/parity_capture/report.py: Jinja2 and
// matplotlib, plots inline as SVG, no scripts).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::report {

struct HtmlSummary {
  int experiments = 0, with_verdicts = 0, profiles = 0, minifies = 0;
};

[[nodiscard]] Expected<HtmlSummary> WriteHtmlReport(const std::vector<std::filesystem::path>& inputs,
                                                    const std::filesystem::path& out, const std::string& title);

}  // namespace parity::report
