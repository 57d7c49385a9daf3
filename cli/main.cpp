// The parity binary: wires the subcommands and owns the one place that maps errors to exit
// codes: 0 all checks passed, 1 a check failed, 2 bad usage or bad input, 3 internal error.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "util/status.h"

int main(int argc, char** argv) {
  CLI::App app{"parity: is the compiled model still computing the right numbers?"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("parity 0.1.0 (built against torch ") + PARITY_TORCH_VERSION_BUILT + ")");
  int exit_code = 0;
  parity::cli::set_repro_command(app, exit_code);
  parity::cli::set_compare_command(app, exit_code);
  parity::cli::set_verify_command(app, exit_code);
  parity::cli::set_models_command(app, exit_code);
  parity::cli::set_backends_command(app, exit_code);
  parity::cli::set_minify_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const parity::Failure& f) {
    std::fflush(stdout);
    std::cerr << "parity: error: " << f.error.message << "\n";
    switch (f.error.kind) {
      case parity::ErrorKind::kBadInput:
      case parity::ErrorKind::kUnsupported: return 2;
      case parity::ErrorKind::kRuntime: return 1;
      case parity::ErrorKind::kInternal: return 3;
    }
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "parity: internal error: " << e.what() << "\n";
    return 3;
  }
  return exit_code;
}
