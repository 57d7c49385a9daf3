// ForEachChunk: every chunk once, each thread's chunks in increasing order, whatever the thread
// count, and a thread slowed down leaves its chunks to the others.
#include "compare/chunks.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace parity::compare {
namespace {

struct Seen {
  int64_t last = -1;  // the last chunk this thread took
  int64_t taken = 0;
};

TEST(Chunks, EveryChunkOnceAndEachThreadsInIncreasingOrder) {
  const int before = at::get_num_threads();
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
      std::atomic<bool> ordered{true};
      ForEachChunk<Seen>(n, [&](Seen& s, int64_t c) {
        if (c <= s.last) ordered = false;
        s.last = c;
        ++visits[static_cast<size_t>(c)];
      });
      for (int64_t c = 0; c < n; ++c) EXPECT_EQ(visits[static_cast<size_t>(c)], 1) << n << " chunks, chunk " << c;
      EXPECT_TRUE(ordered) << n << " chunks, " << threads << " threads";
    }
  }
  at::set_num_threads(before);
}

TEST(Chunks, AThreadSlowedDownLeavesItsShareToTheOthers) {
  // The first thread to take a chunk sleeps in it; with a fixed split it would still owe half
  // the chunks, here the other thread takes nearly all of them meanwhile.
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  if (at::get_num_threads() < 2) GTEST_SKIP() << "one thread only";
  std::mutex m;
  std::vector<int64_t> per_state;
  std::atomic<bool> slept{false};
  ForEachChunk<Seen>(100, [&](Seen& s, int64_t c) {
    if (s.taken++ == 0 && !slept.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (c == 99) {
      std::lock_guard<std::mutex> lock(m);
      per_state.push_back(s.taken);
    }
  });
  at::set_num_threads(before);
  ASSERT_EQ(per_state.size(), 1u);
  // The thread that took the last chunk is the one that did not sleep, and it took almost all.
  EXPECT_GE(per_state[0], 90);
}

}  // namespace
}  // namespace parity::compare
