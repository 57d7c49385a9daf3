// The parity binary: wires the subcommands and owns the one place that maps errors to exit
// codes: 0 all checks passed, 1 a check failed, 2 bad usage or bad input, 3 internal error.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "util/status.h"

namespace {
// A crash of parity itself (not of a backend, which runs in a child) prints a backtrace for the
// bug report, then dies of the same signal.
void OnFatalSignal(int sig) {
  const char msg[] = "parity: fatal signal; backtrace:\n";
  (void)!::write(2, msg, sizeof msg - 1);
  void* frames[64];
  int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnFatalSignal);
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
