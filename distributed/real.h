// The backend's run of every rank of a multi-rank dir, for real: a Python process per rank
// (parity_capture.rank_replay) joined into a process group of the world's size over a file store
// (gloo on the CPU, NCCL on CUDA: a rank per GPU, round robin), each running its rank's graphs
// compiled by the backend, so the compiled collectives (and the backend's communication passes)
// run as in the program. A rank that crashes, or has not finished when the deadline passes, ends
// every rank's process; the error names it and how it ended.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed/world.h"
#include "util/status.h"

namespace parity::distributed {

struct RealRun {
  std::string backend;
  nlohmann::json options = nlohmann::json::object();  // the backend's (Inductor config keys, ...)
  std::string device = "cpu";
  // The group's collective timeout (a rank left waiting in a collective fails with the group's
  // error naming it); parity ends every rank at twice this once all have joined the group (a
  // hang outside collectives); joining has a deadline of its own, at least 300 s.
  std::chrono::milliseconds timeout{120000};
  std::filesystem::path scratch;              // requests, the store, each rank's outputs and log
  // Non-null ({"tol"}): the ranks run PyTorch's compiler bisector in step instead of their graphs
  // once (rank_replay.compiler_bisect_in_step), rank 0 writing its answer to scratch/bisect.json.
  nlohmann::json compiler_bisect;
};

// Each rank's outputs file (safetensors, keys "g<graph index>/output/<k>"), in rank order.
// Runtime error naming the ranks that failed or timed out, with the end of their logs.
[[nodiscard]] Expected<std::vector<std::filesystem::path>> RunReal(const World& world, const RealRun& run);

}  // namespace parity::distributed
