#include "runtime/jobs.h"
#include "util/zygote.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "test_helpers.h"
#include "util/socket.h"

namespace parity::runtime {
namespace {

using Env = std::vector<std::vector<std::string>>;

// A CUDA slot's environment among several: its share of threads (at most 4), its share of the
// cores, its GPU when pinned, then its compile threads (its share of the cores).
std::vector<std::string> Cuda(int threads, int cores, const std::string& gpu = "") {
  std::vector<std::string> e = {"OMP_NUM_THREADS=" + std::to_string(threads), "MKL_NUM_THREADS=" + std::to_string(threads),
                                "PARITY_SLOT_CPUS=" + std::to_string(cores)};
  if (!gpu.empty()) e.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
  e.push_back("TORCHINDUCTOR_COMPILE_THREADS=" + std::to_string(cores));
  return e;
}

// Every variable a slot sets is one a job child forked by the zygote may have otherwise than the
// driver: else each of those slots' job children is refused by the zygote and exec'd (every -j 2
// run's were, for TORCHINDUCTOR_COMPILE_THREADS).
TEST(Jobs, EverySlotVariableLetsTheZygoteForkTheJobChild) {
  for (bool cuda : {false, true})
    for (int jobs : {1, 2, 3, 8})
      for (bool given : {false, true})
        for (const auto& slot : SlotEnvironments(jobs, cuda, 2, "", 16, given))
          for (const auto& var : slot) {
            const auto eq = var.find('=');
            ASSERT_NE(eq, std::string::npos) << var;
            EXPECT_TRUE(ZygoteMayDiffer(JobChildMayDiffer(), var.substr(0, eq), var.substr(eq + 1))) << var;
          }
}

TEST(Jobs, OneCpuSlotGetsNothing) { EXPECT_EQ(SlotEnvironments(1, false, 0, "", 16), Env(1)); }

TEST(Jobs, CudaSlotsGetAShareOfThreadsAtMostFour) {
  // One slot: no GPU pinned, Inductor's compile threads its own.
  EXPECT_EQ(SlotEnvironments(1, true, 8, "", 16), (Env{{"OMP_NUM_THREADS=4", "MKL_NUM_THREADS=4", "PARITY_SLOT_CPUS=16"}}));
  EXPECT_EQ(SlotEnvironments(4, true, 1, "", 16), Env(4, Cuda(4, 4)));
  EXPECT_EQ(SlotEnvironments(8, true, 1, "", 16), Env(8, Cuda(2, 2)));
  EXPECT_EQ(SlotEnvironments(4, true, 1, "", 2), Env(4, Cuda(1, 1)));
}

TEST(Jobs, TheComparisonTakesThreeQuartersOfTheSlotsCores) {
  const char* before = std::getenv(kSlotCpusEnv);
  const std::string saved = before ? before : "";
  for (auto [cpus, want] : {std::pair{"16", 12}, {"8", 6}, {"4", 3}, {"2", 2}, {"1", 1}, {"", 0}, {"x", 0}}) {
    ::setenv(kSlotCpusEnv, cpus, 1);
    EXPECT_EQ(ComparisonCpus(), want) << cpus;
  }
  ::unsetenv(kSlotCpusEnv);
  EXPECT_EQ(ComparisonCpus(), 0);
  if (before) ::setenv(kSlotCpusEnv, saved.c_str(), 1);
}

TEST(Jobs, EachSlotGetsItsOwnGpu) {
  EXPECT_EQ(SlotEnvironments(2, true, 2, "", 16), (Env{Cuda(4, 8, "0"), Cuda(4, 8, "1")}));
  // The GPUs this process may use, round robin.
  EXPECT_EQ(SlotEnvironments(3, true, 2, "4,6", 16), (Env{Cuda(4, 5, "4"), Cuda(4, 5, "6"), Cuda(4, 5, "4")}));
  // One GPU: every slot shares it, nothing to pin.
  EXPECT_EQ(SlotEnvironments(2, true, 1, "", 16), Env(2, Cuda(4, 8)));
}

TEST(Jobs, EightGpusAndMoreSlotsThanGpus) {
  const Env eight = SlotEnvironments(8, true, 8, "", 128);
  ASSERT_EQ(eight.size(), 8u);
  for (size_t k = 0; k < 8; ++k) EXPECT_EQ(eight[k], Cuda(4, 16, std::to_string(k)));
  // -j 4 on 2 GPUs: two slots per GPU, each GPU as busy as the other.
  EXPECT_EQ(SlotEnvironments(4, true, 2, "", 32), (Env{Cuda(4, 8, "0"), Cuda(4, 8, "1"), Cuda(4, 8, "0"), Cuda(4, 8, "1")}));
  const Env sixteen = SlotEnvironments(16, true, 8, "", 128);
  ASSERT_EQ(sixteen.size(), 16u);
  for (size_t k = 0; k < 16; ++k) EXPECT_EQ(sixteen[k], Cuda(4, 8, std::to_string(k % 8)));
}

TEST(Jobs, CpuSlotsSplitTheThreads) {
  const std::vector<std::string> half = {"OMP_NUM_THREADS=8", "MKL_NUM_THREADS=8", "TORCHINDUCTOR_COMPILE_THREADS=8"};
  EXPECT_EQ(SlotEnvironments(2, false, 0, "", 16), (Env{half, half}));
  EXPECT_EQ(SlotEnvironments(4, false, 0, "", 2)[3],
            (std::vector<std::string>{"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "TORCHINDUCTOR_COMPILE_THREADS=1"}));
}

TEST(Jobs, CompileThreadsTheUserSetAreInheritedAsTheyAre) {
  EXPECT_EQ(SlotEnvironments(2, false, 0, "", 16, /*compile_threads_given=*/true),
            (Env(2, {"OMP_NUM_THREADS=8", "MKL_NUM_THREADS=8"})));
  Env cuda = SlotEnvironments(2, true, 2, "", 16, /*compile_threads_given=*/true);
  for (auto& e : cuda) e.push_back("TORCHINDUCTOR_COMPILE_THREADS=8");  // what Cuda() expects beside
  EXPECT_EQ(cuda, (Env{Cuda(4, 8, "0"), Cuda(4, 8, "1")}));
}

// Three runs of one experiment and two others on two slots: the three in the slot the first took,
// one after another; the others in the other slot; jobs without affinity anywhere.
TEST(Jobs, RunsOfOneExperimentStayInTheSlotTheFirstTook) {
  std::vector<Job> jobs = {{{}, "c0", false, "same"}, {{}, "c1", false, "same"}, {{}, "c2", false, "same"},
                           {{}, "s0", false, "stage0"}, {{}, "x", false, ""}};
  std::deque<size_t> pending = {0, 1, 2, 3, 4};
  std::map<std::string, size_t> bound;
  auto take = [&](size_t slot) {
    auto it = NextJobFor(slot, pending, jobs, &bound);
    if (it == pending.end()) return std::string("-");
    const std::string dir = jobs[*it].dir.string();
    pending.erase(it);
    return dir;
  };
  EXPECT_EQ(take(0), "c0");
  EXPECT_EQ(take(1), "s0");  // c1 and c2 wait for slot 0
  EXPECT_EQ(take(1), "x");
  EXPECT_EQ(take(1), "-");  // only slot 0's are left
  EXPECT_EQ(take(0), "c1");
  EXPECT_EQ(take(0), "c2");
  // Without job servers (a fresh child per job) nothing binds: the next in line.
  std::deque<size_t> fresh = {1, 2};
  EXPECT_EQ(*NextJobFor(1, fresh, jobs, nullptr), 1u);
}

// Slots starting jobs that will wait for their workers are told of their next jobs in turns (as
// they would take them one after another), take those first, and nothing else takes them.
TEST(Jobs, SlotsAreToldOfTheirNextJobsInTurnsAndTakeThemFirst) {
  std::vector<Job> jobs;
  for (int i = 0; i < 7; ++i) jobs.push_back({{}, "j" + std::to_string(i), true, ""});
  JobQueue queue(jobs, 2, true);
  EXPECT_EQ(queue.Take(0), 0u);
  EXPECT_EQ(queue.Take(1), 1u);
  queue.Tell({0, 1});
  EXPECT_EQ(queue.Told(0), (std::deque<size_t>{2, 4}));
  EXPECT_EQ(queue.Told(1), (std::deque<size_t>{3, 5}));
  EXPECT_EQ(queue.Take(1), 3u);  // slot 1 ended first: its own next job, not the queue's
  queue.Tell({1});               // its worker restarted: told of one more, after the one it has
  EXPECT_EQ(queue.Told(1), (std::deque<size_t>{5, 6}));
  queue.PushFront(1);            // a retry: the queue's first again
  EXPECT_EQ(queue.Take(0), 2u);
  EXPECT_EQ(queue.Take(0), 4u);
  EXPECT_EQ(queue.Take(0), 1u);
  EXPECT_FALSE(queue.Take(0).has_value());  // what is left was told to slot 1
  EXPECT_FALSE(queue.Empty());
  EXPECT_EQ(queue.Take(1), 5u);
  EXPECT_EQ(queue.Take(1), 6u);
  EXPECT_TRUE(queue.Empty());
}

// A job that crashed or hung preparing a next job failed in that job's place; one that crashed in
// its own phases, or ended with a result, did not.
TEST(Jobs, OnlyAJobThatEndedPreparingANextJobFailedAhead) {
  JobOutcome crashed;
  crashed.how.signal = 11;
  crashed.phase = kAheadPhase;
  EXPECT_TRUE(FailedAhead(crashed));
  crashed.failure = "python worker exited at start-up";  // the job's own worker: its failure
  EXPECT_FALSE(FailedAhead(crashed));
  crashed.failure.clear();
  crashed.phase = "eager";
  EXPECT_FALSE(FailedAhead(crashed));
  JobOutcome done;
  done.phase = kAheadPhase;
  done.result = nlohmann::json::object();
  EXPECT_FALSE(FailedAhead(done));
}

// A job server hands each job the next jobs the driver told of with it (a line
// "DIR<TAB>NEXT<TAB>NEXT"), their specs read, up to one whose spec cannot be; a job told of none
// gets none.
TEST(Jobs, AJobServerHandsAJobTheNextJobTheDriverToldOf) {
  namespace fs = std::filesystem;
  testing::TempDir tmp;
  for (const char* j : {"j1", "j2", "j3"}) {
    fs::create_directories(tmp / j);
    testing::Spit(tmp / j / "spec.json", std::string(R"({"name": ")") + j + "\"}");
  }
  const std::string sock = (tmp / "server.sock").string();
  std::vector<std::string> seen;
  std::thread server([&] {
    JobServerMain(sock, [&](const nlohmann::json& spec, const fs::path&, const PhaseFn&, const std::vector<NextJob>& next) {
      std::string said = spec["name"].get<std::string>() + ">";
      for (const auto& n : next) said += n.spec["name"].get<std::string>() + "@" + n.dir.filename().string() + " ";
      seen.push_back(said);
      return Expected<nlohmann::json>(nlohmann::json::object());
    });
  });
  for (int i = 0; i < 2000 && !fs::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int fd = ConnectUnix(sock);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  auto code = [fd] {
    std::string line;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
    return line;
  };
  ASSERT_TRUE(SendAll(fd, (tmp / "j1").string() + "\t" + (tmp / "j2").string() + "\t" + (tmp / "j3").string() + "\n"));
  EXPECT_EQ(code(), "0");
  ASSERT_TRUE(SendAll(fd, (tmp / "j2").string() + "\t" + (tmp / "none").string() + "\t" + (tmp / "j3").string() + "\n"));
  EXPECT_EQ(code(), "0");
  ASSERT_TRUE(SendAll(fd, (tmp / "j3").string() + "\n"));
  EXPECT_EQ(code(), "0");
  ::close(fd);
  server.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"j1>j2@j2 j3@j3 ", "j2>", "j3>"}));
}

}  // namespace
}  // namespace parity::runtime
