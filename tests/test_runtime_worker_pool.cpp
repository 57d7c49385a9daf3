// The pool of kept workers against its files, with a fake worker (a process whose command line
// names parity_capture.worker): entries are claimed one process-wide lock at a time, a live
// entry is adopted, one that does not answer is ended instead, a new one made only when this
// process keeps workers, the pool dir is this user's alone, and the key changes with anything a
// worker's behaviour depends on.
#include "runtime/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "runtime/worker.h"
#include "test_helpers.h"
#include "util/subprocess.h"

namespace parity::runtime {
namespace {
namespace fs = std::filesystem;

// The pool at a temp dir for the test's life, and this process's keep setting back after.
class Pool : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() / "not-yet" / "pool";  // its parents are made too
    ::setenv(kWorkerPoolEnv, dir_.c_str(), 1);
    keep_ = KeepWorkers();
  }
  void TearDown() override {
    SetKeepWorkers(keep_);
    ::unsetenv(kWorkerPoolEnv);
  }
  testing::TempDir tmp_;
  fs::path dir_;
  int keep_ = 0;
};

TEST_F(Pool, NoPoolDirNoKeepNothingToAdopt) {
  SetKeepWorkers(0);
  EXPECT_FALSE(PoolClaim::Claim({}).has_value());
  EXPECT_FALSE(fs::exists(dir_));  // looking does not create it
}

TEST_F(Pool, TheDirIsCreatedClosedAndRefusedWhenOthersMayEnter) {
  ASSERT_TRUE(PoolDir(true).ok());
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  ::chmod(dir_.c_str(), 0755);
  auto bad = PoolDir(true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(bad.error().message.find(dir_.string()), std::string::npos);
  EXPECT_NE(bad.error().message.find(kWorkerPoolEnv), std::string::npos);
}

TEST_F(Pool, KeepingMakesNewEntriesOneHolderEach) {
  SetKeepWorkers(30);
  auto a = PoolClaim::Claim({"OMP_NUM_THREADS=1"});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->warm_pid(), 0);  // nothing warm: a new entry
  auto b = PoolClaim::Claim({"OMP_NUM_THREADS=1"});
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(a->socket_path(), b->socket_path());  // a is held: b gets the next entry
  const std::string first = a->socket_path();
  a.reset();
  auto c = PoolClaim::Claim({"OMP_NUM_THREADS=1"});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->socket_path(), first);  // released: free again
}

TEST_F(Pool, AWarmEntryIsAdoptedAlsoWithoutKeeping) {
  SetKeepWorkers(30);
  std::string sock;
  auto fake = Child::Spawn({"/bin/sh", "-c", "sleep 60; :", "parity_capture.worker"});
  ASSERT_TRUE(fake.ok());
  {
    auto made = PoolClaim::Claim({});
    ASSERT_TRUE(made.has_value());
    made->Started(fake->pid(), 30);
    sock = made->socket_path();
    std::ofstream(sock) << "";  // as if listening
    std::ofstream(made->log_path()) << "its log";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // /bin/sh has exec'd
  ASSERT_TRUE(IsLiveWorker(fake->pid()));
  SetKeepWorkers(0);
  auto warm = PoolClaim::Claim({});
  ASSERT_TRUE(warm.has_value());
  EXPECT_EQ(warm->warm_pid(), fake->pid());
  EXPECT_EQ(warm->socket_path(), sock);
  auto listed = ListPool();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE((*listed)[0].live);
  EXPECT_TRUE((*listed)[0].in_use);
  EXPECT_EQ((*listed)[0].keep_idle_s, 30);
  EXPECT_EQ(*StopPool(), 0);  // in use: left to its holder
  warm.reset();
  EXPECT_EQ(*StopPool(), 1);
  EXPECT_TRUE(fs::is_empty(dir_));  // the entry is gone, its log too
  EXPECT_TRUE(fake->Wait(std::chrono::milliseconds(5000)).signal != 0);
  EXPECT_FALSE(PoolClaim::Claim({}).has_value());  // nothing warm, not keeping
}

TEST_F(Pool, AWorkerThatDoesNotAnswerIsNotAdoptedButEnded) {
  SetKeepWorkers(30);
  auto fake = Child::Spawn({"/bin/sh", "-c", "sleep 60; :", "parity_capture.worker"});
  ASSERT_TRUE(fake.ok());
  {
    auto made = PoolClaim::Claim({});
    ASSERT_TRUE(made.has_value());
    made->Started(fake->pid(), 30);
    std::ofstream(made->socket_path()) << "";  // a socket no one answers on
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto w = WorkerProcess::ForSlot((tmp_.path() / "w.sock").string(), (tmp_.path() / "w.log").string(), {});
  EXPECT_FALSE(w->adopted());
  EXPECT_TRUE(fake->Wait(std::chrono::milliseconds(5000)).signal != 0);  // a busy or stuck worker is never trusted
}

TEST_F(Pool, ADeadEntryIsNotAdopted) {
  SetKeepWorkers(30);
  {
    auto made = PoolClaim::Claim({});
    ASSERT_TRUE(made.has_value());
    made->Started(::getpid(), 30);  // this test process is no worker
    std::ofstream(made->socket_path()) << "";
  }
  SetKeepWorkers(0);
  EXPECT_FALSE(PoolClaim::Claim({}).has_value());
  EXPECT_FALSE(IsLiveWorker(::getpid()));
}

TEST_F(Pool, TheKeyFollowsTheWorkersEnvironment) {
  const std::string base = PoolKey({});
  EXPECT_EQ(PoolKey({}), base);
  EXPECT_NE(PoolKey({"OMP_NUM_THREADS=1"}), base);
  EXPECT_NE(PoolKey({"CUDA_VISIBLE_DEVICES=1"}), PoolKey({"CUDA_VISIBLE_DEVICES=0"}));
  EXPECT_EQ(PoolKey({"_=/usr/bin/other"}), base);  // the shell's last command changes nothing
  // What only parity's C++ side reads: its config file, whether it forks workers.
  for (const char* kv : {"PARITY_CONFIG=/elsewhere/config.json", "PARITY_FORK_SERVER=0"}) {
    EXPECT_EQ(PoolKey({kv}), base) << kv;
    EXPECT_EQ(ForkServerKey({kv}), ForkServerKey({})) << kv;
  }
  ::setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/elsewhere", 1);
  EXPECT_NE(PoolKey({}), base);
  ::unsetenv("TORCHINDUCTOR_CACHE_DIR");
  EXPECT_EQ(PoolKey({}), base);
  // Inductor's own default, as a process that used Inductor leaves it in its environment: the
  // same worker as where it is unset; and Inductor's pointer for its compile children is no part.
  const std::vector<std::string> who = {"LOGNAME=alice", "TMPDIR=/tmp/t"};
  auto with = [&](const std::string& kv) {
    auto e = who;
    e.push_back(kv);
    return PoolKey(e);
  };
  EXPECT_EQ(with("TORCHINDUCTOR_CACHE_DIR=/tmp/t/torchinductor_alice"), PoolKey(who));
  EXPECT_NE(with("TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor_alice"), PoolKey(who));
  EXPECT_EQ(with("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR=140352772820000"), PoolKey(who));
}

TEST_F(Pool, AForkServerServesWorkersThatDifferOnlyInWhatTheyReadOrSetAfterTheFork) {
  const std::string base = ForkServerKey({});
  EXPECT_NE(base, PoolKey({}));
  // --import's modules, cuBLAS's workspace, a CI shard's index, a slot's cores, the cache dir:
  // other workers, one server.
  for (const char* kv : {"PARITY_IMPORT=my_plugin", "CUBLAS_WORKSPACE_CONFIG=:4096:8", "CI_NODE_INDEX=2", "SLURM_ARRAY_TASK_ID=1",
                         "PARITY_SLOT_CPUS=2", "PARITY_CACHE_DIR=/elsewhere"}) {
    EXPECT_NE(PoolKey({kv}), PoolKey({})) << kv;
    EXPECT_EQ(ForkServerKey({kv}), base) << kv;
  }
  // A job slot's thread counts (set alike): one server for every slot size, each fork sets its
  // own. Set otherwise they are what torch read at its import: another server.
  const std::string slots = ForkServerKey({"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"});
  EXPECT_EQ(ForkServerKey({"OMP_NUM_THREADS=2", "MKL_NUM_THREADS=2"}), slots);
  EXPECT_NE(PoolKey({"OMP_NUM_THREADS=2", "MKL_NUM_THREADS=2"}), PoolKey({"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"}));
  EXPECT_NE(slots, base);
  for (const auto& kvs : std::vector<std::vector<std::string>>{{"OMP_NUM_THREADS=1"},
                                                                {"OMP_NUM_THREADS=2"},
                                                                {"OMP_NUM_THREADS=2", "MKL_NUM_THREADS=1"},
                                                                {"OMP_NUM_THREADS=x", "MKL_NUM_THREADS=x"}}) {
    EXPECT_NE(ForkServerKey(kvs), base) << kvs[0];
    EXPECT_NE(ForkServerKey(kvs), slots) << kvs[0];
  }
  EXPECT_NE(ForkServerKey({"OMP_NUM_THREADS=1"}), ForkServerKey({"OMP_NUM_THREADS=2"}));
  // A slot's GPU and its compile threads (set in the fork, or read after it): the slots of a run
  // on several GPUs share one server. How many GPUs are visible is what the imports saw.
  const std::string gpu0 = ForkServerKey({"CUDA_VISIBLE_DEVICES=0", "TORCHINDUCTOR_COMPILE_THREADS=16"});
  EXPECT_EQ(ForkServerKey({"CUDA_VISIBLE_DEVICES=1", "TORCHINDUCTOR_COMPILE_THREADS=8"}), gpu0);
  EXPECT_EQ(ForkServerKey({"CUDA_VISIBLE_DEVICES=1"}), gpu0);
  EXPECT_NE(PoolKey({"CUDA_VISIBLE_DEVICES=1"}), PoolKey({"CUDA_VISIBLE_DEVICES=0"}));
  EXPECT_NE(ForkServerKey({"CUDA_VISIBLE_DEVICES=0,1"}), gpu0);
  EXPECT_NE(ForkServerKey({"CUDA_VISIBLE_DEVICES="}), gpu0);
  // What torch reads at its import: another server.
  for (const char* kv : {"TORCHINDUCTOR_FREEZING=1", "HOME=/elsewhere"}) EXPECT_NE(ForkServerKey({kv}), base) << kv;
  // PYTHONPATH: the fork adopts the request's (or refuses it: forkserver.py), one server.
  const char* pp = std::getenv("PYTHONPATH");
  const std::string saved = pp ? pp : "", pool = PoolKey({});
  ::setenv("PYTHONPATH", "/elsewhere", 1);  // parity's own Python environment puts it after its tools dir
  EXPECT_EQ(ForkServerKey({}), base);
  EXPECT_NE(PoolKey({}), pool);  // a kept worker's path is its own
  if (pp)
    ::setenv("PYTHONPATH", saved.c_str(), 1);
  else
    ::unsetenv("PYTHONPATH");
}

}  // namespace
}  // namespace parity::runtime
