// The files people and CI systems read, written next to results.jsonl by `parity verify` and
// `parity ci`: accuracy.csv (the dynamo runner's accuracy CSV, for dashboards that read it),
// junit.xml (one testcase per experiment), summary.md (also appended to $GITHUB_STEP_SUMMARY
// when set). Built from results.jsonl records and, after a gate, its verdicts (gate.json rows).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::report {

// One experiment as the reports show it: the record and, when a gate ran, its row.
struct Entry {
  nlohmann::json record;
  nlohmann::json gate;  // null when no gate ran; else {verdict, status, expected, note, ...}
};

// What an experiment amounts to for every report: `kind` pass, skipped, fail or error (the
// gate's verdict when one ran: XFAIL, FLAKY and DRIFT pass), `label` the verdict or code shown.
struct Outcome {
  std::string kind, label;
};
Outcome OutcomeOf(const Entry& entry);

// The records of `results` (the last record of each fingerprint), each with its gate row from
// `gate_rows` (matched by fingerprint) when given.
std::vector<Entry> Entries(const std::vector<nlohmann::json>& records, const nlohmann::json& gate_rows);

// `dev,name,batch_size,accuracy,graph_breaks,unique_graphs,compilation_latency`: the runner's
// first four columns and statuses (ci/statuses.h), then what parity knows of its dynamo stats.
std::string AccuracyCsv(const std::vector<Entry>& entries);
// JUnit XML: a testsuite per configuration, a testcase per experiment; a FAIL is <failure> with
// the message and the failing outputs' statistics, an exception or crash <error>, a skip
// <skipped>. After a gate, its verdict decides (XFAIL and FLAKY pass, with a note).
std::string JUnitXml(const std::vector<Entry>& entries);
// Markdown: totals, one row per experiment, the failures' messages.
std::string SummaryMarkdown(const std::vector<Entry>& entries, const std::string& title);

// Writes the three files into `dir` (atomically) and appends summary.md to the file named by
// $GITHUB_STEP_SUMMARY when it is set.
[[nodiscard]] Status WriteReports(const std::filesystem::path& dir, const std::vector<Entry>& entries, const std::string& title);

}  // namespace parity::report
