// The parity binary: wires the subcommands and owns the one place that maps errors to exit
// codes: 0 all checks passed, 1 a check failed, 2 bad usage or bad input, 3 internal error.
#include <dlfcn.h>
#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "runtime/jobs.h"
#include "util/status.h"
#include "util/zygote.h"

namespace {
// A crash of parity itself (not of a backend, which runs in a child) prints where it happened
// for the bug report (faulting address, instruction, the return address on the stack, a
// backtrace), then dies of the same signal.
void Where(const char* what, void* p) {
  Dl_info info{};
  char buf[512];
  int n;
  if (p && ::dladdr(p, &info) && info.dli_fname)
    n = std::snprintf(
        buf, sizeof buf, "  %s %p = %s(%s+0x%lx) [%s+0x%lx]\n", what, p, info.dli_fname, info.dli_sname ? info.dli_sname : "?",
        static_cast<unsigned long>(static_cast<char*>(p) - static_cast<char*>(info.dli_saddr ? info.dli_saddr : info.dli_fbase)),
        info.dli_fname, static_cast<unsigned long>(static_cast<char*>(p) - static_cast<char*>(info.dli_fbase)));
  else
    n = std::snprintf(buf, sizeof buf, "  %s %p\n", what, p);
  (void)!::write(2, buf, static_cast<size_t>(n));
}

void OnFatalSignal(int sig, siginfo_t* si, void* ctx) {
  const char msg[] = "parity: fatal signal; where:\n";
  (void)!::write(2, msg, sizeof msg - 1);
  Where("fault address", si->si_addr);
#if defined(__x86_64__)
  auto* uc = static_cast<ucontext_t*>(ctx);
  void* rip = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
  void** rsp = reinterpret_cast<void**>(uc->uc_mcontext.gregs[REG_RSP]);
  Where("instruction", rip);
  for (int i = 0; i < 4; ++i) Where("stack word", rsp[i]);
#endif
  void* frames[64];
  int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

// The commands: what main runs, and what a child the zygote forks runs (util/zygote.h).
int RunParity(int argc, char** argv);

namespace {
int g_argc = 0;
char** g_argv = nullptr;  // main's, for the zygote (what ps shows of its children)
}  // namespace

void parity::cli::StartJobZygote() {
  // Job children (`parity _experiment`) forked instead of exec'd, their environment differing from
  // this process's only in what parity reads after it loaded (runtime/jobs.h).
  parity::StartZygote(g_argc, g_argv, RunParity, parity::runtime::JobChildMayDiffer());
}

namespace {
// `parity _zygote-server SOCKET [IDLE_S]`: no command. The process serves forks of itself at SOCKET
// (util/zygote.h, ServeZygote) for a harness that runs parity hundreds of times (the Python tests:
// tests/python/pytest_fork.py starts one), each child the start of `parity ARGS` without libtorch's
// static initialisation again (0.17 CPU-s of every parity process on a 2-core CPU).
constexpr const char* kZygoteServer = "_zygote-server";

// What this binary and its libraries read of the environment as they load, which a child of the
// server therefore has as the server started: the dynamic loader's and glibc's settings, OpenMP's
// and MKL's (OpenMP's thread count excepted: applied again), libtorch's (its static
// initialisation), the sanitizers' options. parity's own reads come later, per command.
std::vector<std::string> ReadAtLoad() {
  return {"LD_*",    "GLIBC_TUNABLES", "MALLOC_*",     "OMP_*",        "KMP_*",        "GOMP_*",      "MKL_*",
          "TORCH_*", "PYTORCH_*",      "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"};
}
}  // namespace

int RunParity(int argc, char** argv) {
  CLI::App app{"parity: is the compiled model still computing the right numbers?"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand
  app.add_flag_callback(
      "--no-verify-digests", [] { ::setenv("PARITY_NO_VERIFY_DIGESTS", "1", 1); },
      "load repro dirs whose tensors do not match the manifest's tensors_sha256 (also for the children)");
  app.set_version_flag("--version", std::string("parity 0.1.0 (built against torch ") + PARITY_TORCH_VERSION_BUILT + ", git " +
                                        PARITY_TORCH_GIT_BUILT + ", CUDA " + PARITY_TORCH_CUDA_BUILT + ")");
  int exit_code = 0;
  parity::cli::set_repro_command(app, exit_code);
  parity::cli::set_compare_command(app, exit_code);
  parity::cli::set_verify_command(app, exit_code);
  parity::cli::set_models_command(app, exit_code);
  parity::cli::set_backends_command(app, exit_code);
  parity::cli::set_minify_command(app, exit_code);
  parity::cli::set_ci_command(app, exit_code);
  parity::cli::set_merge_command(app, exit_code);
  parity::cli::set_report_command(app, exit_code);
  parity::cli::set_profile_command(app, exit_code);
  parity::cli::set_workers_command(app, exit_code);
  parity::cli::set_import_command(app, exit_code);
  parity::cli::set_experiment_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const parity::Failure& f) {
    std::fflush(stdout);
    std::cerr << "parity: error: " << f.error.message << "\n";
    return parity::ExitStatus(f.error.kind);
  } catch (const std::exception& e) {
    std::cerr << "parity: internal error: " << e.what() << "\n";
    return 3;
  }
  return exit_code;
}

namespace {
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define PARITY_LEAK_CHECK_AT_EXIT 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PARITY_LEAK_CHECK_AT_EXIT 1
#endif

// The end of every parity process (its own exit status, whoever called exit), once what the
// command made has been torn down: the statics made during it (the process's own worker, its
// shared-memory segments, the zygote's reaping at exit) were destroyed before this handler runs,
// as it was registered before they were made. What is left are the statics made before main,
// libtorch's above all, whose destructors only free memory and take every operator out of the
// dispatcher again: 60 ms of every parity process on a 2-core CPU (exit after the command's
// last write, `parity --version`), which a verify pays once per job child too. stdio is flushed,
// then the process ends. Not under a sanitizer: its leak check runs at exit after this.
void EndBeforeLibtorchTeardown(int status, void*) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}
}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__) && !defined(PARITY_LEAK_CHECK_AT_EXIT)
  ::on_exit(EndBeforeLibtorchTeardown, nullptr);  // first: runs after every later atexit and static
#endif
  struct sigaction sa {};
  sa.sa_sigaction = OnFatalSignal;
  sa.sa_flags = SA_SIGINFO;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::sigaction(sig, &sa, nullptr);
  g_argc = argc;
  g_argv = argv;
  if (argc >= 3 && std::strcmp(argv[1], kZygoteServer) == 0)
    parity::ServeZygote(argv[2], argc, argv, RunParity, ReadAtLoad(), argc > 3 ? std::atoi(argv[3]) : 0);
  return RunParity(argc, argv);
}
