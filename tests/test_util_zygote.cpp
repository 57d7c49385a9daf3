// util/zygote.h: each case runs in a fresh process (a fork of this test: one thread) that starts a
// zygote whose entry is Entry below and checks its children; a check that fails says which on
// stderr and exits 1.
#include "util/zygote.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "util/socket.h"
#include "util/subprocess.h"

extern char** environ;

namespace parity {
namespace {

// A child's program: argv[1] says what it does.
int Entry(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "exit") return std::atoi(argv[2]);
  if (what == "killed") ::kill(::getpid(), SIGTERM);  // not SIGSEGV: a sanitizer would catch it and exit
  if (what == "hang") ::pause();
  if (what == "report") {  // what it was given and where it runs
    using MaxThreads = int (*)();
    auto omp = reinterpret_cast<MaxThreads>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    const char* value = std::getenv("PARITY_ZYGOTE_TEST");
    char cwd[4096];
    std::printf("%s %d %d %d %s %s\n", value ? value : "-", omp ? omp() : -1, static_cast<int>(::getppid()),
                static_cast<int>(::getpgrp() == ::getpid()), ::getcwd(cwd, sizeof cwd), argc > 2 ? argv[2] : "-");
    return 0;
  }
  return 99;
}

#define CHECK_OR_EXIT(cond)                                                  \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "zygote check failed: %s (line %d)\n", #cond, __LINE__); \
      std::_Exit(1);                                                         \
    }                                                                        \
  } while (0)

// `body` in a fresh process that started a zygote first (after `before`); whether every check passed.
bool InFreshProcess(const std::function<void()>& body, const std::function<void()>& before = [] {}) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("GTEST_FILTER", "-*", 1);  // an exec of this binary instead of a fork runs no test, and the checks fail
    ::unsetenv("PARITY_ZYGOTE");
    before();
    static char args[] = "zygote-test\0case\0";
    static char* argv[] = {args, args + 12, nullptr};
    StartZygote(2, argv, Entry, {"PARITY_ZYGOTE_TEST"});
    body();
    std::_Exit(0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether `pid` is no process any more, or a zombie its adopter has yet to reap.
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return text.empty() || (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z');
}

// This process's environment as NAME=VALUE entries: a request's, to run as this process would.
std::vector<std::string> Environ() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

TEST(Zygote, ChildrenRunTheEntryWithTheirArgvEnvironmentAndThreads) {
  char tmpl[] = "/tmp/parity_zygote_XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ::close(fd);
  const std::string out = tmpl;
  EXPECT_TRUE(InFreshProcess([&] {
              SpawnOptions so;
              so.env = {"PARITY_ZYGOTE_TEST=42", "OMP_NUM_THREADS=3"};
              so.stdout_path = out;
              auto child = Child::Spawn({SelfExe(), "report", "arg"}, so);
              CHECK_OR_EXIT(child.ok());
              const ExitInfo e = child->Wait(std::chrono::seconds(20));
              CHECK_OR_EXIT(e.exited && e.code == 0);
              std::istringstream line(Slurp(out));
              std::string value, cwd, arg;
              int threads = 0, ppid = 0, own_group = 0;
              line >> value >> threads >> ppid >> own_group >> cwd >> arg;
              char here[4096];
              CHECK_OR_EXIT(value == "42" && arg == "arg" && own_group == 1);
              CHECK_OR_EXIT(::getcwd(here, sizeof here) && cwd == here);
              CHECK_OR_EXIT(ppid != ::getpid());  // the zygote's child: no exec of the binary
              CHECK_OR_EXIT(threads == 3 || threads == -1);  // OpenMP's count applied where it is loaded
            }));
  std::remove(tmpl);
}

TEST(Zygote, ExitCodesSignalsAndDeadlinesAsAnExecdChildsAre) {
  EXPECT_TRUE(InFreshProcess([] {
              auto a = Child::Spawn({SelfExe(), "exit", "7"});
              CHECK_OR_EXIT(a.ok());
              ExitInfo e = a->Wait(std::chrono::seconds(20));
              CHECK_OR_EXIT(e.exited && e.code == 7);
              auto b = Child::Spawn({SelfExe(), "killed"});  // the zygote ignores SIGTERM; its child does not
              CHECK_OR_EXIT(b.ok());
              e = b->Wait(std::nullopt);
              CHECK_OR_EXIT(!e.exited && e.signal == SIGTERM);
              auto c = Child::Spawn({SelfExe(), "hang"});
              CHECK_OR_EXIT(c.ok());
              const pid_t hung = c->pid();
              CHECK_OR_EXIT(!c->Poll());
              e = c->Wait(std::chrono::milliseconds(300));
              CHECK_OR_EXIT(e.timed_out);
              CHECK_OR_EXIT(::kill(hung, 0) != 0);  // killed and reaped by the zygote
            }));
}

TEST(Zygote, RefusesAnEnvironmentItsLibrariesReadAtLoad) {
  EXPECT_TRUE(InFreshProcess([] {
              std::vector<std::string> env = Environ();
              auto same = ZygoteSpawn({SelfExe(), "exit", "0"}, env, 0, 1, 2);
              CHECK_OR_EXIT(same && same->pid > 0);
              ::close(same->status_fd);
              env.push_back("PARITY_ZYGOTE_TEST=1");  // named by the binary: read later
              auto named = ZygoteSpawn({SelfExe(), "exit", "0"}, env, 0, 1, 2);
              CHECK_OR_EXIT(named && named->pid > 0);
              ::close(named->status_fd);
              env.push_back("GLIBC_TUNABLES=glibc.malloc.check=0");  // read as the binary loaded
              CHECK_OR_EXIT(!ZygoteSpawn({SelfExe(), "exit", "0"}, env, 0, 1, 2));
              env.pop_back();
              env.push_back("OMP_NUM_THREADS=2,1");  // not a count the zygote can apply again
              CHECK_OR_EXIT(!ZygoteSpawn({SelfExe(), "exit", "0"}, env, 0, 1, 2));
            }));
}

TEST(Zygote, NoneInAProcessWithAnotherThreadOrWhenTurnedOff) {
  std::thread* other = nullptr;
  EXPECT_TRUE(InFreshProcess([] { CHECK_OR_EXIT(!ZygoteSpawn({SelfExe(), "exit", "0"}, {}, 0, 1, 2)); },
                           [&] { other = new std::thread([] { ::pause(); }); }));
  EXPECT_TRUE(InFreshProcess([] { CHECK_OR_EXIT(!ZygoteSpawn({SelfExe(), "exit", "0"}, {}, 0, 1, 2)); },
                           [] { ::setenv("PARITY_ZYGOTE", "0", 1); }));
}

TEST(Zygote, ItsChildrenDieWithTheProcessThatStartedIt) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_TRUE(InFreshProcess([&] {
              auto c = Child::Spawn({SelfExe(), "hang"});
              CHECK_OR_EXIT(c.ok());
              const pid_t pid = c->Release();
              CHECK_OR_EXIT(::write(pipe_fds[1], &pid, sizeof pid) == sizeof pid);
              std::_Exit(0);  // without killing it
            }));
  pid_t hung = 0;
  ASSERT_EQ(::read(pipe_fds[0], &hung, sizeof hung), static_cast<ssize_t>(sizeof hung));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  auto gone = [&] { return Gone(hung); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gone() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(gone()) << "pid " << hung;
  if (!gone()) ::kill(hung, SIGKILL);
}

// Ended processes this process adopted (as a subreaper) and reaped, up to `most` within `wait`:
// what an init would have had to reap.
int Adopted(int most, std::chrono::milliseconds wait) {
  int n = 0;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (n < most && std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(-1, &st, WNOHANG) > 0) ++n;
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return n;
}

TEST(Zygote, TheProcessThatStartedItReapsItAtExit) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // what it leaves behind comes here instead of to init
  auto ran_a_child = [] {
    auto c = Child::Spawn({SelfExe(), "exit", "0"});
    CHECK_OR_EXIT(c.ok() && c->Wait(std::chrono::seconds(20)).exited);
  };
  EXPECT_TRUE(InFreshProcess([&] {
              ran_a_child();
              std::exit(0);  // atexit: the zygote reaped
            }));
  EXPECT_EQ(Adopted(1, std::chrono::milliseconds(500)), 0);
  EXPECT_TRUE(InFreshProcess(ran_a_child));  // _Exit: no atexit, the zygote left to its adopter
  EXPECT_EQ(Adopted(1, std::chrono::seconds(10)), 1);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// A request to the server at `path`, as a process of any language makes one (util/zygote.h): the
// child's stdout is `out_fd`; the status socket's lines until it closes (`pid N` or `refused ...`,
// then `exit N` or `signal N`). `caller`: what the caller does with its end of the status socket
// before the request is sent.
enum class CallerEnd {
  kOpen,
  kGivenUp,     // closed, as a caller that had no answer in time does (no lines then)
  kHalfClosed,  // its writing side shut down, which it never needs
};
std::vector<std::string> Request(const std::string& path, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, int out_fd, CallerEnd caller = CallerEnd::kOpen) {
  sockaddr_un addr;
  if (!UnixAddress(path, addr)) return {"no connection"};
  const int conn = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (::connect(conn, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(conn);
    return {"no connection"};
  }
  char cwd[4096];
  std::string payload = std::string(::getcwd(cwd, sizeof cwd)) + '\0' + std::to_string(argv.size()) + '\0';
  for (const auto& a : argv) payload += a + '\0';
  for (const auto& e : env) payload += e + '\0';
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const int fds[4] = {sv[1], 0, out_fd, 2};
  if (caller == CallerEnd::kGivenUp) ::close(sv[0]);
  if (caller == CallerEnd::kHalfClosed) ::shutdown(sv[0], SHUT_WR);
  EXPECT_EQ(SendWithFds(conn, payload, fds, 4), static_cast<ssize_t>(payload.size()));
  ::close(sv[1]);
  ::close(conn);
  if (caller == CallerEnd::kGivenUp) return {};
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(sv[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(sv[0]);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A server at `path` forked from this process (the fork has one thread), its argv `zygote-server`.
pid_t StartServer(const std::string& path, int idle_seconds) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("GTEST_FILTER", "-*", 1);
    static char args[] = "zygote-server\0";
    static char* argv[] = {args, nullptr};
    ServeZygote(path, 1, argv, Entry, {"ZYGOTE_TEST_FIXED_*", "OMP_*"}, idle_seconds);
  }
  struct stat st {};
  for (int i = 0; i < 500 && ::stat(path.c_str(), &st) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pid;
}

// Kills and reaps the server at the end of a test that did not (one whose assertion failed): a
// server left behind would hold the test binary's stdout open, and its caller would wait forever.
struct ServerReaper {
  pid_t pid;
  ~ServerReaper() {
    int st = 0;
    if (pid > 0 && ::waitpid(pid, &st, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
    }
  }
};

// A server test's temporary dir: the server's socket `path`, a child's output file `out`; both
// removed with the dir at the end (`made`: whether mkdtemp made it).
struct ServerDir {
  char dir[32] = "/tmp/parity_zserver_XXXXXX";
  bool made = ::mkdtemp(dir) != nullptr;
  std::string path = std::string(dir) + "/z.sock", out = std::string(dir) + "/out";
  ~ServerDir() {
    std::remove(out.c_str());
    ::rmdir(dir);
  }
};

TEST(ZygoteServer, ForksForAnyProcessOfThisUserWhateverItSetsButWhatIsReadAtLoad) {
  const ServerDir d;
  ASSERT_TRUE(d.made);
  const std::string &path = d.path, &out = d.out;
  const pid_t server = StartServer(path, 0);
  const ServerReaper reaper{server};
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);  // this user's only
  std::vector<std::string> env = Environ();
  env.push_back("PARITY_ZYGOTE_TEST=17");  // named nowhere: any variable may differ but the fixed ones
  env.push_back("OMP_NUM_THREADS=3");      // a count: applied again
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  auto lines = Request(path, {"zygote-server", "report", "arg"}, env, fd);
  ::close(fd);
  ASSERT_EQ(lines.size(), 2u) << (lines.empty() ? "" : lines[0]);
  EXPECT_EQ(lines[0].rfind("pid ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1], "exit 0");
  std::istringstream report(Slurp(out));
  std::string value, cwd, arg;
  int threads = 0, ppid = 0, own_group = 0;
  report >> value >> threads >> ppid >> own_group >> cwd >> arg;
  char here[4096];
  EXPECT_EQ(value, "17");
  EXPECT_EQ(arg, "arg");
  EXPECT_EQ(ppid, server);
  EXPECT_EQ(own_group, 1);
  EXPECT_EQ(cwd, ::getcwd(here, sizeof here));
  EXPECT_TRUE(threads == 3 || threads == -1);
  lines = Request(path, {"zygote-server", "exit", "7"}, env, 1);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "exit 7");
  env.push_back("ZYGOTE_TEST_FIXED_X=1");  // read as the binary loaded: refused, the caller execs
  lines = Request(path, {"zygote-server", "exit", "0"}, env, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("refused ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("ZYGOTE_TEST_FIXED_X"), std::string::npos) << lines[0];
  // A second server at the path leaves the first serving.
  const pid_t second = StartServer(path, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(second, &status, 0), second);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(::kill(server, 0), 0);
  ::kill(server, SIGTERM);
  ::waitpid(server, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(::stat(path.c_str(), &st), 0);  // its socket removed
}

TEST(ZygoteServer, ARequestItsCallerGaveUpOnRunsNothing) {
  const ServerDir d;
  ASSERT_TRUE(d.made);
  const std::string &path = d.path, &out = d.out;
  const pid_t server = StartServer(path, 0);
  const ServerReaper reaper{server};
  std::vector<std::string> env = Environ();
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  Request(path, {"zygote-server", "report", "given-up"}, env, fd, CallerEnd::kGivenUp);
  // Served in order: once the next request's child has ended, the first was served (or dropped).
  // That caller shut down only its writing side: it is still there, and its child runs.
  auto lines = Request(path, {"zygote-server", "report", "waited"}, env, fd, CallerEnd::kHalfClosed);
  ::close(fd);
  ASSERT_EQ(lines.size(), 2u) << (lines.empty() ? "" : lines[0]);
  EXPECT_EQ(lines[1], "exit 0");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a child of the first would have written by now
  const std::string text = Slurp(out);
  EXPECT_EQ(text.find("given-up"), std::string::npos) << text;
  EXPECT_NE(text.find("waited"), std::string::npos) << text;
  int status = 0;
  ::kill(server, SIGTERM);
  ::waitpid(server, &status, 0);
}

TEST(ZygoteServer, EndsIdleOrOnSigtermAndItsChildrenWithIt) {
  const ServerDir d;
  ASSERT_TRUE(d.made);
  const std::string& path = d.path;
  pid_t server = StartServer(path, 1);
  int status = 0;
  EXPECT_EQ(::waitpid(server, &status, 0), server);  // a second without a request
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  server = StartServer(path, 1);
  const ServerReaper reaper{server};
  std::vector<std::string> env = Environ();
  pid_t hung = 0;
  std::thread client([&] {
    auto lines = Request(path, {"zygote-server", "hang"}, env, 1);
    if (!lines.empty() && lines[0].rfind("pid ", 0) == 0) hung = std::atoi(lines[0].c_str() + 4);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the idle time: a child runs
  EXPECT_EQ(::kill(server, 0), 0);
  ::kill(server, SIGTERM);
  EXPECT_EQ(::waitpid(server, &status, 0), server);
  client.join();
  ASSERT_GT(hung, 0);
  auto gone = [hung] { return Gone(hung); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gone() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(gone()) << "pid " << hung;
  if (!gone()) ::kill(hung, SIGKILL);
}

}  // namespace
}  // namespace parity
