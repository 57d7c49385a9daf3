// Simulated replay's collectives: every rank's graphs run in one process (a thread per rank), and
// each collective is computed from the values the ranks of its group bring, in group-rank order
// (a fixed order: the same result on every run and every machine). The k-th collective a rank
// calls on a group meets the k-th call of every other member of that group, as in a process
// group. A member that ends its run without joining, or that has not joined when the timeout
// passes, fails the collective on every rank that waits, naming the missing ranks and the op.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "interpreter/collectives.h"

namespace parity::distributed {

class SimulatedWorld {
 public:
  // `groups`: group name -> members' global ranks in group order.
  SimulatedWorld(int world_size, std::map<std::string, std::vector<int>> groups, std::chrono::milliseconds timeout);

  // Rank `rank`'s view of the world: the Collectives its runs use.
  std::shared_ptr<interp::Collectives> Rank(int rank);
  // Rank `rank`'s run is over (passed, failed or stopped): a collective waiting for it fails.
  void Finished(int rank);

  // Called by a rank's Collectives: blocks until the group's members have all joined this call.
  void Join(int rank, const c10::OperatorHandle& op, torch::jit::Stack& stack);

 private:
  struct Call;
  const std::vector<int>& Members(const std::string& group, int rank, const std::string& op) const;

  const int world_size_;
  const std::map<std::string, std::vector<int>> groups_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Call>> calls_;  // (group, call index)
  std::map<std::pair<std::string, int>, int64_t> next_;                      // (group, rank) -> its next call index
  std::vector<bool> finished_;
};

// The results of collective `op` (its schema name without namespace, e.g. "all_reduce") for each
// member, from each member's arguments (schema order), in group order. Throws on an op it does
// not know or arguments the members disagree on. Exposed for unit tests.
std::vector<torch::jit::Stack> Compute(const c10::OperatorHandle& op, std::vector<torch::jit::Stack>& args);

}  // namespace parity::distributed
