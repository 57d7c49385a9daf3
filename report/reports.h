// The files people and CI systems read, written next to results.jsonl by `parity verify` and
// `parity ci`: accuracy.csv (the dynamo runner's accuracy CSV, for dashboards that read it),
// junit.xml (one testcase per experiment), summary.md (also appended to $GITHUB_STEP_SUMMARY
// when set). Built from results.jsonl records and, after a gate, its verdicts (gate.json rows):
// what fails is what the gate decided (results/verdict.h GateRow::fails), never decided again here.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "results/record.h"
#include "results/verdict.h"
#include "util/status.h"

namespace parity::report {

// One experiment as the reports show it: the record and, when a gate ran, its row.
struct Entry {
  results::Record record;
  std::optional<results::GateRow> gate;
  results::Outcome outcome() const { return results::OutcomeOf(record, gate ? &*gate : nullptr); }
};

// The records (the last record of each fingerprint), each with its gate row from `rows`
// (matched by fingerprint).
std::vector<Entry> Entries(const std::vector<results::Record>& records, const std::vector<results::GateRow>& rows = {});

// `dev,name,batch_size,accuracy,graph_breaks,unique_graphs,compilation_latency`: the runner's
// first four columns and statuses (results/statuses.h), then what parity knows of its dynamo stats.
std::string AccuracyCsv(const std::vector<Entry>& entries);
// JUnit XML: a testsuite per configuration, a testcase per experiment; a failing outcome is a
// <failure> (a wrong result) or an <error> (an exception, a crash) with the message and the
// failing outputs' statistics, a skip <skipped>; a passing verdict other than PASS, or a result
// decided without its fp64 reference, says so in <system-out>.
std::string JUnitXml(const std::vector<Entry>& entries);
// Markdown: totals, one row per experiment, the failures' messages.
std::string SummaryMarkdown(const std::vector<Entry>& entries, const std::string& title);

// Writes the three files into `dir` (atomically) and appends summary.md to the file named by
// $GITHUB_STEP_SUMMARY when it is set.
[[nodiscard]] Status WriteReports(const std::filesystem::path& dir, const std::vector<Entry>& entries, const std::string& title);

}  // namespace parity::report
