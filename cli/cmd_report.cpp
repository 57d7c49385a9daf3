// parity report RESULTS... -o report.html
#include <iostream>

#include "cli/commands.h"
#include "report/html.h"

namespace parity::cli {

void set_report_command(CLI::App& app, int& exit_code) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>("report.html");
  auto title = std::make_shared<std::string>("parity report");
  CLI::App* cmd = app.add_subcommand(
      "report", "One self-contained HTML report (matrix, per-output error statistics and distributions) from results");
  cmd->add_option("results", *inputs,
                  "results.jsonl files or the output dirs holding them (a gate.json beside adds verdicts); parity minify "
                  "OUT dirs or their summary.json (the culprit and the divergence map)")
      ->required();
  cmd->add_option("-o,--output", *out, "the HTML file to write (default report.html)");
  cmd->add_option("--title", *title, "the report's title");
  cmd->callback([inputs, out, title, &exit_code] {
    std::vector<std::filesystem::path> paths(inputs->begin(), inputs->end());
    auto s = Unwrap(report::WriteHtmlReport(paths, *out, *title));
    std::cout << "report: " << s.experiments << " experiments (" << s.with_verdicts << " with gate verdicts), " << s.profiles
              << " profiles, " << s.minifies << " minify runs -> " << *out << "\n";
    exit_code = 0;
  });
}

}  // namespace parity::cli
