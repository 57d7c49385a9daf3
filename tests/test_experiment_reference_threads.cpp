#include "experiment/reference_threads.h"

#include <gtest/gtest.h>

namespace parity::experiment {
namespace {

// Runs `body` with the intra-op pool at `threads`, putting back what it found.
template <typename F>
void WithThreads(int threads, F body) {
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  body();
  at::set_num_threads(before);
}

TEST(ReferenceThreads, ACoreIsLeftToAWorkerStillStartingAndGivenBackOnceItAnswers) {
  WithThreads(2, [] {
    bool listening = false;
    {
      ReferenceThreads threads([&] { return listening; });
      threads.Share();
      EXPECT_EQ(at::get_num_threads(), 1);
      listening = true;  // the worker answered between two reference steps
      threads.Share();
      EXPECT_EQ(at::get_num_threads(), 2);
      listening = false;
      threads.Share();
      EXPECT_EQ(at::get_num_threads(), 1);
    }
    EXPECT_EQ(at::get_num_threads(), 2);  // put back when it ends
  });
}

TEST(ReferenceThreads, NothingChangesWithoutAStartingWorkerOrWithOneThread) {
  WithThreads(2, [] {
    ReferenceThreads none{std::function<bool()>()};
    none.Share();
    EXPECT_EQ(at::get_num_threads(), 2);
  });
  WithThreads(1, [] {
    ReferenceThreads one([] { return false; });
    one.Share();
    EXPECT_EQ(at::get_num_threads(), 1);  // never none
  });
}

}  // namespace
}  // namespace parity::experiment
