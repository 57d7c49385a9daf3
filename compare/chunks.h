// Chunks of one pass over a tensor, spread over ATen's threads.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace parity::compare {

// Calls body(state, c) once for every chunk c in [0, n), on ATen's threads: each thread takes the
// next chunk no thread has taken yet (one shared counter) instead of a fixed 1/threads of the
// range, so a thread slowed by another process on its core leaves its chunks to the others (a
// fixed split waits for its slowest thread; docs/gpu.md, "The comparison's threads"). Each
// thread has a `State` of its own (value-initialised) and takes its chunks in increasing order,
// so what a thread learnt from its earlier chunks is about elements before the current one. What
// a chunk computes must not depend on which thread runs it: results are then those of a serial
// pass over the chunks.
template <typename State, typename Body>
void ForEachChunk(int64_t n, Body&& body) {
  if (n <= 0) return;
  std::atomic<int64_t> next{0};
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), n);
  at::parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {  // one index per thread, unless the pool has fewer threads
      State state{};
      for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < n; c = next.fetch_add(1, std::memory_order_relaxed))
        body(state, c);
    }
  });
}

}  // namespace parity::compare
