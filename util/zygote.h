// The zygote: a copy of this process made as it starts, which runs this binary's entry for a child
// that would otherwise be an exec of the binary (SelfExe()), so that such a child costs a fork, not
// the binary's start again. Nothing parity-specific; the binary says what its entry is and which of
// the environment it reads only after it has loaded.
//
// Why: a parity process spends 0.22 CPU-s starting, nearly all of it libtorch's static
// initialisation (the dispatcher's registrations; perf on a 2-core CPU), and every `parity verify`
// starts a job server per slot, every `parity minify` more.
//
// StartZygote forks it from main before anything else ran: one thread (checked), no OpenMP pool,
// no CUDA (a fork of a process that initialised CUDA cannot use it). It waits for requests on a
// socket only this process holds; per request (argv, the environment, the working dir, the child's
// stdin, stdout and stderr, and a status socket) it forks the child into a process group of its
// own, answers `pid N` on the status socket and, once the child ended, `exit N` or `signal N`. The
// child dies with the zygote (PR_SET_PDEATHSIG), which dies with this process: a killed driver
// leaves no child behind, as with an exec'd child. At this process's exit (atexit) the zygote is
// told to end and reaped. The child takes the request's environment and
// working dir, calls the entry with argv and exits with what it returns.
//
// What the binary's libraries read of the environment as they loaded (glibc its tunables, OpenMP
// its thread count) is the zygote's: this process's as it started. OpenMP's count the child applies
// again (omp_set_num_threads, where OpenMP is loaded: a request may set OMP_NUM_THREADS to any
// count). A request whose environment differs from the start in another variable not named in
// `may_differ` (what the binary reads only later) is refused, and the caller execs instead.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace parity {

// The binary's entry as a child runs it: argv as main gets it; its return value is the exit code.
using ZygoteEntry = int (*)(int argc, char** argv);

// Forks the zygote unless $PARITY_ZYGOTE is "0", this process has another thread, or one was
// started already. `argc`, `argv`: main's (a child's command line is shown where ps reads them,
// as far as it fits). `may_differ`: variable names (a trailing '*' a prefix) a request's
// environment may set otherwise than this process's.
void StartZygote(int argc, char** argv, ZygoteEntry entry, std::vector<std::string> may_differ);

// Whether a request may set `name` to `value` otherwise than this process started with: `name` is
// one of `may_differ` (a trailing '*' a prefix), or it is OpenMP's thread count and `value` a
// positive count (the child applies it again). The zygote's own rule, for callers that state
// which variables their children are started with.
bool ZygoteMayDiffer(const std::vector<std::string>& may_differ, const std::string& name, const std::string& value);

// This process, as it starts (main, before anything else ran), becomes a zygote of its own that
// serves any process of this user (a test harness that runs the binary hundreds of times): it
// listens at `socket_path` (a Unix seqpacket socket, this user's only; exits 0 at once where one
// already listens there) and answers each connection's one request as a driver's zygote answers its
// driver's. A request is one message: the working dir, the argc, the argv and the environment
// (NAME=VALUE), each ended by a NUL, with four descriptors (SCM_RIGHTS): a stream socket for the
// status, then the child's stdin, stdout and stderr. On the status socket come `pid N` (the child,
// a process group of its own) or `refused WHY` (the caller runs the binary itself), then `exit N`
// or `signal N`; a request whose status socket's other end has closed by the time its child starts
// (its caller gave up waiting) runs nothing: the child exits 127 before the entry. A request may
// set any variable otherwise than this process started with except those named in `read_at_load` (a
// trailing '*' a prefix: what the binary and its libraries read as they loaded), OpenMP's thread
// count excepted (applied again). It ends on SIGTERM or SIGINT, or after `idle_seconds` (0: never)
// without a request while no child runs; its children die with it. Exit 2, said on stderr, when it
// cannot serve.
[[noreturn]] void ServeZygote(const std::string& socket_path, int argc, char** argv, ZygoteEntry entry,
                              std::vector<std::string> read_at_load, int idle_seconds);

// A child the zygote forked: its pid (its own process group) and the socket on which the zygote
// says how it ended (one line: `exit N` or `signal N`; EOF when the zygote died first).
struct ZygoteChild {
  pid_t pid = -1;
  int status_fd = -1;
};

// Asks the zygote for a child running the entry with `argv` and the whole environment `env`
// (NAME=VALUE), its stdin, stdout and stderr these fds (duplicated). nullopt, and the caller
// execs, when there is no zygote, the zygote refused (the environment) or did not answer in 10 s;
// a request given up so runs nothing when the zygote comes to it (its status socket closed), so
// the binary never runs twice for one call.
std::optional<ZygoteChild> ZygoteSpawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int in_fd,
                                       int out_fd, int err_fd);

}  // namespace parity
