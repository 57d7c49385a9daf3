// parity verify [DIR...] --model M --backend B ...
#include <iostream>

#include "cli/commands.h"
#include "cli/experiment_options.h"
#include "distributed/verify_worlds.h"
#include "report/reports.h"

namespace parity::cli {

void set_verify_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<MatrixArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "Verify backends against eager and an fp64 reference (accuracy check)");
  AddMatrixOptions(cmd, *a);
  cmd->callback([a, &exit_code] {
    const verify::VerifyOptions o = ToVerifyOptions(*a);
    auto summary = Unwrap(distributed::VerifyWithWorlds(o, std::cout));
    auto records = Unwrap(results::ReadRecords(summary.results_file, results::ReadMode::kLenient));
    Unwrap(report::WriteReports(o.output_dir, report::Entries(records), "parity verify"));
    // A bad repro dir among good ones: the good ones verified and reported, the run still exit 2.
    exit_code = !summary.bad_dirs.empty() ? 2 : summary.failed > 0 ? 1 : 0;
  });
}

}  // namespace parity::cli
