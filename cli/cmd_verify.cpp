// parity verify [DIR...] --model M --backend B ...
#include <iostream>

#include "cli/commands.h"
#include "cli/verify_args.h"

namespace parity::cli {

void set_verify_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "Verify backends against eager and an fp64 reference (accuracy check)");
  AddVerifyOptions(cmd, *a);
  cmd->callback([a, &exit_code] {
    auto summary = Unwrap(verifier::Verify(ToVerifyOptions(*a), std::cout));
    exit_code = summary.failed > 0 ? 1 : 0;
  });
}

}  // namespace parity::cli
