#include "distributed/simulated.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace parity::distributed {

struct SimulatedWorld::Call {
  std::string op;
  std::vector<std::optional<torch::jit::Stack>> args;  // by group rank
  std::vector<torch::jit::Stack> results;
  std::string error;
  bool done = false;
  size_t taken = 0;
};

namespace {

class RankCollectives : public interp::Collectives {
 public:
  RankCollectives(SimulatedWorld* world, int rank) : world_(world), rank_(rank) {}
  void Call(const c10::OperatorHandle& op, torch::jit::Stack& stack) override { world_->Join(rank_, op, stack); }

 private:
  SimulatedWorld* world_;
  int rank_;
};

std::string BaseName(const c10::OperatorHandle& op) {
  const std::string& full = op.schema().name();
  return full.substr(full.find("::") + 2);
}

size_t ArgIndex(const c10::OperatorHandle& op, const std::string& name) {
  const auto& args = op.schema().arguments();
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k].name() == name) return k;
  throw std::runtime_error(op.schema().name() + " has no argument \"" + name + "\"");
}

std::string Names(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// `reduce_op` over the members' tensors in group order.
at::Tensor Reduce(const std::vector<at::Tensor>& xs, const std::string& how) {
  at::Tensor acc = xs[0].clone();
  for (size_t k = 1; k < xs.size(); ++k) {
    const at::Tensor& x = xs[k];
    if (how == "sum" || how == "avg") acc.add_(x);
    else if (how == "product") acc.mul_(x);
    else if (how == "min") acc = at::minimum(acc, x);
    else if (how == "max") acc = at::maximum(acc, x);
    else if (how == "band") acc.bitwise_and_(x);
    else if (how == "bor") acc.bitwise_or_(x);
    else if (how == "bxor") acc.bitwise_xor_(x);
    else throw std::runtime_error("reduce_op \"" + how + "\" is not one parity computes (sum, avg, product, min, max, band, bor, bxor)");
  }
  if (how == "avg") {
    if (!at::isFloatingType(acc.scalar_type()) && !at::isComplexType(acc.scalar_type()))
      throw std::runtime_error("reduce_op \"avg\" of an integer tensor");
    acc.div_(static_cast<double>(xs.size()));
  }
  return acc;
}

// Member m's tensor (or tensor list) at argument k of each member's arguments.
std::vector<at::Tensor> Tensors(std::vector<torch::jit::Stack>& args, size_t k) {
  std::vector<at::Tensor> out;
  for (auto& a : args) out.push_back(a[k].toTensor());
  return out;
}
std::vector<std::vector<at::Tensor>> TensorLists(std::vector<torch::jit::Stack>& args, size_t k) {
  std::vector<std::vector<at::Tensor>> out;
  for (auto& a : args) out.push_back(a[k].toTensorVector());
  for (const auto& l : out)
    if (l.size() != out[0].size()) throw std::runtime_error("the members pass tensor lists of different lengths");
  return out;
}
// The i-th tensor of every member's list.
std::vector<at::Tensor> Column(const std::vector<std::vector<at::Tensor>>& lists, size_t i) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.push_back(l[i]);
  return out;
}

torch::jit::Stack One(at::Tensor t) { return {c10::IValue(std::move(t))}; }
torch::jit::Stack List(std::vector<at::Tensor> ts) { return {c10::IValue(std::move(ts))}; }

}  // namespace

// The members must agree on the collective's non-tensor arguments (reduce op, sizes, source,
// group): a rank that reduces by another op than the others is a program bug parity names.
void CheckAgreement(const c10::OperatorHandle& op, const std::vector<torch::jit::Stack>& args) {
  const auto& schema = op.schema().arguments();
  for (size_t k = 0; k < schema.size() && k < args[0].size(); ++k) {
    const auto kind = schema[k].type()->kind();
    if (kind != c10::TypeKind::StringType && kind != c10::TypeKind::IntType && kind != c10::TypeKind::AnyType) continue;
    for (size_t m = 1; m < args.size(); ++m)
      if (args[m].size() > k && !(args[m][k] == args[0][k]))
        throw std::runtime_error("the members disagree on argument \"" + schema[k].name() + "\"");
  }
}

namespace {

using Stacks = std::vector<torch::jit::Stack>;

// Whether the op writes into an argument (its in-place `_` name or its `out` overload).
bool Writes(const c10::OperatorHandle& op, const char* inplace_name) {
  return BaseName(op) == inplace_name || op.schema().overload_name() == "out";
}

// Each member's result: `value`, copied into the member's own `dst` when the op writes in place.
torch::jit::Stack Deliver(const at::Tensor& value, bool in_place, torch::jit::Stack& member, size_t dst) {
  return One(in_place ? member[dst].toTensor().copy_(value) : value.clone());
}

Stacks AllReduce(const c10::OperatorHandle& op, Stacks& args) {
  const at::Tensor r = Reduce(Tensors(args, 0), args[0][ArgIndex(op, "reduce_op")].toStringRef());
  const bool in_place = Writes(op, "all_reduce_");
  Stacks out;
  for (auto& a : args) out.push_back(Deliver(r, in_place, a, 0));
  return out;
}

Stacks AllReduceCoalesced(const c10::OperatorHandle& op, Stacks& args) {
  const std::string how = args[0][ArgIndex(op, "reduce_op")].toStringRef();
  const bool in_place = BaseName(op) == "all_reduce_coalesced_";
  auto lists = TensorLists(args, 0);
  std::vector<std::vector<at::Tensor>> res(args.size());
  for (size_t i = 0; i < lists[0].size(); ++i) {
    at::Tensor r = Reduce(Column(lists, i), how);
    for (size_t m = 0; m < args.size(); ++m) res[m].push_back(in_place ? lists[m][i].copy_(r) : r.clone());
  }
  Stacks out;
  for (auto& l : res) out.push_back(List(std::move(l)));
  return out;
}

Stacks AllGather(const c10::OperatorHandle& op, Stacks& args) {
  const at::Tensor g = at::cat(Tensors(args, 0), 0);
  const bool in_place = Writes(op, "all_gather_into_tensor_out");
  Stacks out;
  for (auto& a : args) out.push_back(Deliver(g, in_place, a, in_place ? ArgIndex(op, "out") : 0));
  return out;
}

Stacks AllGatherCoalesced(const c10::OperatorHandle&, Stacks& args) {
  auto lists = TensorLists(args, 0);
  std::vector<std::vector<at::Tensor>> res(args.size());
  for (size_t i = 0; i < lists[0].size(); ++i) {
    at::Tensor g = at::cat(Column(lists, i), 0);
    for (auto& r : res) r.push_back(g.clone());
  }
  Stacks out;
  for (auto& l : res) out.push_back(List(std::move(l)));
  return out;
}

// The reduction of the members' tensors, one dim-0 chunk per member.
std::vector<at::Tensor> ReducedChunks(const std::vector<at::Tensor>& xs, const std::string& how, const std::string& op) {
  auto chunks = Reduce(xs, how).chunk(static_cast<int64_t>(xs.size()), 0);
  if (chunks.size() != xs.size()) throw std::runtime_error(op + ": dim 0 does not split into the group's size");
  return chunks;
}

Stacks ReduceScatter(const c10::OperatorHandle& op, Stacks& args) {
  auto chunks = ReducedChunks(Tensors(args, 0), args[0][ArgIndex(op, "reduce_op")].toStringRef(), "reduce_scatter_tensor");
  const bool in_place = Writes(op, "reduce_scatter_tensor_out");
  Stacks out;
  for (size_t m = 0; m < args.size(); ++m) out.push_back(Deliver(chunks[m], in_place, args[m], in_place ? ArgIndex(op, "out") : 0));
  return out;
}

Stacks ReduceScatterCoalesced(const c10::OperatorHandle& op, Stacks& args) {
  const std::string how = args[0][ArgIndex(op, "reduce_op")].toStringRef();
  auto lists = TensorLists(args, 0);
  std::vector<std::vector<at::Tensor>> res(args.size());
  for (size_t i = 0; i < lists[0].size(); ++i) {
    auto chunks = ReducedChunks(Column(lists, i), how, "reduce_scatter_tensor_coalesced");
    for (size_t m = 0; m < args.size(); ++m) res[m].push_back(chunks[m].clone());
  }
  Stacks out;
  for (auto& l : res) out.push_back(List(std::move(l)));
  return out;
}

// Sender s splits its input along dim 0 by its input_split_sizes (equal parts when empty);
// receiver r's output is every sender's r-th part, in group order.
Stacks AllToAllSingle(const c10::OperatorHandle& op, Stacks& args) {
  const size_t n = args.size(), in_k = ArgIndex(op, "input_split_sizes");
  std::vector<std::vector<at::Tensor>> parts(n);
  for (size_t s = 0; s < n; ++s) {
    at::Tensor x = args[s][0].toTensor();
    std::vector<int64_t> sizes = args[s][in_k].toIntVector();
    parts[s] = sizes.empty() ? x.chunk(static_cast<int64_t>(n), 0) : x.split_with_sizes(sizes, 0);
    if (parts[s].size() != n) throw std::runtime_error("all_to_all_single: a sender's input does not split into the group's size");
  }
  Stacks out;
  for (size_t r = 0; r < n; ++r) out.push_back(One(at::cat(Column(parts, r), 0)));
  return out;
}

// DTensor's Shard(gather_dim) -> Shard(shard_dim): the members' inputs concatenated along
// gather_dim in group order, split along shard_dim into parts of size / n; member m gets part m
// (an empty one where there are fewer parts), as _local_tensor computes it.
Stacks ShardDimAlltoall(const c10::OperatorHandle& op, Stacks& args) {
  const size_t n = args.size();
  const int64_t gather_dim = args[0][ArgIndex(op, "gather_dim")].toInt();
  const int64_t shard_dim = args[0][ArgIndex(op, "shard_dim")].toInt();
  at::Tensor g = at::cat(Tensors(args, 0), gather_dim);
  const int64_t part = g.size(shard_dim) / static_cast<int64_t>(n);
  if (part == 0)
    throw std::runtime_error("shard_dim_alltoall: shard_dim's size " + std::to_string(g.size(shard_dim)) +
                             " is smaller than the group's " + std::to_string(n));
  auto parts = g.split(part, shard_dim);
  Stacks out;
  for (size_t m = 0; m < n; ++m) out.push_back(One(m < parts.size() ? parts[m].contiguous().clone() : g.narrow(shard_dim, 0, 0).clone()));
  return out;
}

Stacks Broadcast(const c10::OperatorHandle& op, Stacks& args) {
  const int64_t src = args[0][ArgIndex(op, "src")].toInt();  // the source's group rank
  if (src < 0 || src >= static_cast<int64_t>(args.size()))
    throw std::runtime_error("broadcast: src " + std::to_string(src) + " is not a group rank");
  const at::Tensor v = args[static_cast<size_t>(src)][0].toTensor();
  const bool in_place = BaseName(op) == "broadcast_";
  Stacks out;
  for (auto& a : args) out.push_back(Deliver(v, in_place, a, 0));
  return out;
}

using ComputeFn = Stacks (*)(const c10::OperatorHandle&, Stacks&);

// Every collective the simulated replay computes, by name (interp::IsCollective's ops, less
// wait_tensor, which SimulatedWorld::Join answers itself).
const std::map<std::string, ComputeFn>& Computations() {
  static const std::map<std::string, ComputeFn> table = {
      {"all_reduce", AllReduce},
      {"all_reduce_", AllReduce},
      {"all_reduce_coalesced", AllReduceCoalesced},
      {"all_reduce_coalesced_", AllReduceCoalesced},
      {"all_gather_into_tensor", AllGather},
      {"all_gather_into_tensor_out", AllGather},
      {"all_gather_into_tensor_coalesced", AllGatherCoalesced},
      {"reduce_scatter_tensor", ReduceScatter},
      {"reduce_scatter_tensor_out", ReduceScatter},
      {"reduce_scatter_tensor_coalesced", ReduceScatterCoalesced},
      {"all_to_all_single", AllToAllSingle},
      {"shard_dim_alltoall", ShardDimAlltoall},
      {"broadcast", Broadcast},
      {"broadcast_", Broadcast},
  };
  return table;
}

}  // namespace

std::vector<torch::jit::Stack> Compute(const c10::OperatorHandle& op, std::vector<torch::jit::Stack>& args) {
  CheckAgreement(op, args);
  auto it = Computations().find(BaseName(op));
  if (it == Computations().end())
    throw std::runtime_error("collective " + op.schema().name() + " is not one parity's simulated replay computes");
  return it->second(op, args);
}

SimulatedWorld::SimulatedWorld(int world_size, std::map<std::string, std::vector<int>> groups, std::chrono::milliseconds timeout)
    : world_size_(world_size), groups_(std::move(groups)), timeout_(timeout), finished_(static_cast<size_t>(world_size), false) {}

std::shared_ptr<interp::Collectives> SimulatedWorld::Rank(int rank) { return std::make_shared<RankCollectives>(this, rank); }

void SimulatedWorld::Finished(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_.at(static_cast<size_t>(rank)) = true;
  cv_.notify_all();
}

const std::vector<int>& SimulatedWorld::Members(const std::string& group, int rank, const std::string& op) const {
  auto it = groups_.find(group);
  if (it == groups_.end())
    throw std::runtime_error(op + " on group \"" + group + "\", which no rank's manifest records (distributed.process_groups)");
  if (std::find(it->second.begin(), it->second.end(), rank) == it->second.end())
    throw std::runtime_error(op + " on group \"" + group + "\", whose members (" + Names(it->second) + ") do not include rank " +
                             std::to_string(rank));
  return it->second;
}

void SimulatedWorld::Join(int rank, const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const std::string opname = op.schema().name();
  if (BaseName(op) == "wait_tensor") {  // the value is ready when its collective returned
    stack.resize(1);
    return;
  }
  const std::string group = stack.at(ArgIndex(op, "group_name")).toStringRef();
  const std::vector<int>& members = Members(group, rank, opname);
  const size_t me = static_cast<size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t index = next_[{group, rank}]++;
  std::shared_ptr<Call>& slot = calls_[{group, index}];
  if (!slot) {
    slot = std::make_shared<Call>();
    slot->op = opname;
    slot->args.resize(members.size());
  }
  std::shared_ptr<Call> call = slot;
  const std::string what = "collective #" + std::to_string(index) + " of group \"" + group + "\"";
  if (call->op != opname && call->error.empty())
    call->error = what + ": rank " + std::to_string(rank) + " calls " + opname + ", another member calls " + call->op;
  call->args[me] = stack;
  cv_.notify_all();
  auto missing = [&] {
    std::vector<int> out;
    for (size_t m = 0; m < members.size(); ++m)
      if (!call->args[m]) out.push_back(members[m]);
    return out;
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!call->done && call->error.empty()) {
    std::vector<int> absent = missing();
    if (absent.empty()) {
      std::vector<torch::jit::Stack> args;
      for (auto& a : call->args) args.push_back(*a);
      try {
        call->results = Compute(op, args);
      } catch (const std::exception& e) {
        call->error = what + " (" + opname + "): " + e.what();
      }
      call->done = true;
      cv_.notify_all();
      break;
    }
    std::vector<int> ended;
    for (int r : absent)
      if (finished_.at(static_cast<size_t>(r))) ended.push_back(r);
    if (!ended.empty()) {
      call->error = what + " (" + opname + "): rank " + Names(ended) + " ended its run without joining it";
      cv_.notify_all();
      break;
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !call->done && !missing().empty()) {
      std::ostringstream secs;
      secs << static_cast<double>(timeout_.count()) / 1000.0;
      call->error = "timeout after " + secs.str() + " s: " + what + " (" + opname + "): rank " + Names(missing()) +
                    " never joined it";
      cv_.notify_all();
      break;
    }
  }
  std::string error = call->error;
  torch::jit::Stack result = error.empty() ? call->results[me] : torch::jit::Stack{};
  if (++call->taken == members.size()) calls_.erase({group, index});
  lock.unlock();
  if (!error.empty()) throw std::runtime_error(error);
  stack = std::move(result);
}

}  // namespace parity::distributed
