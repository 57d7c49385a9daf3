// The CPU reference's intra-op threads while the Python worker is starting beside it.
#pragma once

#include <ATen/Parallel.h>

#include <functional>
#include <utility>

namespace parity::experiment {

// While `listening` says the worker has not answered yet, the reference runs on one core fewer,
// left to the worker's imports (torch, dynamo, Inductor: single-threaded, and the longer side).
// Sharing every core made those imports the wait: a warm BERT train step on a 2-core CPU spent
// 2.9 s in worker_start after a 1.8 s reference (docs/benchmarks.md). Share() is asked before each
// reference step (eager twice, fp64), so a worker that answered gets every core back to the
// reference; a kept worker answers before the first. Without `listening` (no worker starting, a
// GPU run) nothing changes. The thread count the object found is put back when it ends.
class ReferenceThreads {
 public:
  explicit ReferenceThreads(std::function<bool()> listening)
      : listening_(std::move(listening)), threads_(at::get_num_threads()) {}
  ~ReferenceThreads() { Restore(); }
  ReferenceThreads(const ReferenceThreads&) = delete;
  ReferenceThreads& operator=(const ReferenceThreads&) = delete;

  void Share() const {
    if (listening_ && threads_ > 1) at::set_num_threads(listening_() ? threads_ : threads_ - 1);
  }
  void Restore() const {
    if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
  }

 private:
  std::function<bool()> listening_;
  const int threads_;
};

}  // namespace parity::experiment
