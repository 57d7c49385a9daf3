#include "distributed/simulated.h"
#include "interpreter/collectives.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <thread>

namespace parity::distributed {
namespace {

c10::OperatorHandle Op(const char* name, const char* overload = "") {
  auto h = c10::Dispatcher::singleton().findSchema({name, overload});
  EXPECT_TRUE(h.has_value()) << name;
  return *h;
}

// Each member's arguments: the tensor (or list) first, then the rest of the schema's arguments.
std::vector<torch::jit::Stack> Args(const std::vector<at::Tensor>& xs, std::vector<c10::IValue> rest) {
  std::vector<torch::jit::Stack> out;
  for (const auto& x : xs) {
    torch::jit::Stack s{x};
    s.insert(s.end(), rest.begin(), rest.end());
    out.push_back(s);
  }
  return out;
}

TEST(Simulated, ReducesInGroupOrderAsAProcessGroupDoes) {
  const std::vector<at::Tensor> xs = {at::tensor({1.0, 5.0}), at::tensor({3.0, 2.0}), at::tensor({2.0, 8.0})};
  auto op = Op("_c10d_functional::all_reduce");
  for (auto [how, want] : std::vector<std::pair<std::string, at::Tensor>>{{"sum", at::tensor({6.0, 15.0})},
                                                                          {"avg", at::tensor({2.0, 5.0})},
                                                                          {"max", at::tensor({3.0, 8.0})},
                                                                          {"min", at::tensor({1.0, 2.0})},
                                                                          {"product", at::tensor({6.0, 80.0})}}) {
    auto args = Args(xs, {c10::IValue(how), c10::IValue(std::string("0"))});
    auto out = Compute(op, args);
    ASSERT_EQ(out.size(), 3u);
    for (const auto& s : out) EXPECT_TRUE(at::equal(s[0].toTensor(), want)) << how;
  }
}

TEST(Simulated, GathersScattersAndExchangesByGroupRank) {
  const std::vector<at::Tensor> xs = {at::arange(4.0).reshape({2, 2}), at::arange(4.0, 8.0).reshape({2, 2})};
  auto gather = Args(xs, {c10::IValue(int64_t{2}), c10::IValue(std::string("g"))});
  auto g = Compute(Op("_c10d_functional::all_gather_into_tensor"), gather);
  EXPECT_TRUE(at::equal(g[1][0].toTensor(), at::arange(8.0).reshape({4, 2})));
  // reduce_scatter: the sum's chunk of each group rank.
  auto rs = Args(xs, {c10::IValue(std::string("sum")), c10::IValue(int64_t{2}), c10::IValue(std::string("g"))});
  auto r = Compute(Op("_c10d_functional::reduce_scatter_tensor"), rs);
  EXPECT_TRUE(at::equal(r[0][0].toTensor(), at::tensor({4.0, 6.0}).reshape({1, 2})));
  EXPECT_TRUE(at::equal(r[1][0].toTensor(), at::tensor({8.0, 10.0}).reshape({1, 2})));
  // all_to_all_single with equal splits: receiver r gets every sender's r-th row.
  auto a2a = Args(xs, {c10::IValue(std::vector<int64_t>{}), c10::IValue(std::vector<int64_t>{}), c10::IValue(std::string("g"))});
  auto t = Compute(Op("_c10d_functional::all_to_all_single"), a2a);
  EXPECT_TRUE(at::equal(t[0][0].toTensor(), at::tensor({0.0, 1.0, 4.0, 5.0}).reshape({2, 2})));
  EXPECT_TRUE(at::equal(t[1][0].toTensor(), at::tensor({2.0, 3.0, 6.0, 7.0}).reshape({2, 2})));
  // broadcast from group rank 1.
  auto b = Args(xs, {c10::IValue(int64_t{1}), c10::IValue(std::string("g"))});
  auto bo = Compute(Op("_c10d_functional::broadcast"), b);
  EXPECT_TRUE(at::equal(bo[0][0].toTensor(), xs[1]));
}

TEST(Simulated, ShardDimAlltoallMovesTheShardAsGlooDoes) {
  // DTensor's Shard(0) -> Shard(1) on 2 ranks; the values gloo's shard_dim_alltoall returned for
  // these inputs (torch 2.13, two processes).
  const std::vector<at::Tensor> xs = {at::arange(8.0).reshape({2, 4}), at::arange(8.0).reshape({2, 4}) + 10};
  auto args = Args(xs, {c10::IValue(int64_t{0}), c10::IValue(int64_t{1}), c10::IValue(std::string("g"))});
  auto out = Compute(Op("_dtensor::shard_dim_alltoall"), args);
  EXPECT_TRUE(at::equal(out[0][0].toTensor(), at::tensor({0.0, 1.0, 4.0, 5.0, 10.0, 11.0, 14.0, 15.0}).reshape({4, 2})));
  EXPECT_TRUE(at::equal(out[1][0].toTensor(), at::tensor({2.0, 3.0, 6.0, 7.0, 12.0, 13.0, 16.0, 17.0}).reshape({4, 2})));
  EXPECT_TRUE(out[1][0].toTensor().is_contiguous());
  EXPECT_TRUE(interp::IsCollective("_dtensor::shard_dim_alltoall") && interp::IsCollective("_c10d_functional::wait_tensor"));
  EXPECT_FALSE(interp::IsCollective("aten::add") || interp::IsCollective("_dtensor::other"));
}

TEST(Simulated, InPlaceOutAndCoalescedFormsComputeAsTheirFunctionalOnes) {
  const std::vector<at::Tensor> xs = {at::tensor({1.0, 5.0, 2.0, 4.0}), at::tensor({3.0, 2.0, 6.0, 0.0})};
  const c10::IValue g(std::string("g"));
  // all_reduce_: each member's own input holds the sum, and is what it gets back.
  std::vector<at::Tensor> mine = {xs[0].clone(), xs[1].clone()};
  auto inplace = Args(mine, {c10::IValue(std::string("sum")), g});
  auto r = Compute(Op("_c10d_functional::all_reduce_"), inplace);
  for (size_t m = 0; m < 2; ++m) {
    EXPECT_TRUE(at::equal(mine[m], at::tensor({4.0, 7.0, 8.0, 4.0})));
    EXPECT_TRUE(r[m][0].toTensor().is_same(mine[m]));
  }
  // all_reduce_coalesced (and its in-place form): each list position reduced on its own.
  auto lists = [&](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    return std::vector<torch::jit::Stack>{{c10::IValue(c10::List<at::Tensor>(a)), c10::IValue(std::string("max")), g},
                                          {c10::IValue(c10::List<at::Tensor>(b)), c10::IValue(std::string("max")), g}};
  };
  auto co = lists({xs[0], xs[0] * 2}, {xs[1], xs[1] * 2});
  auto c = Compute(Op("_c10d_functional::all_reduce_coalesced"), co);
  const auto got = c[1][0].toTensorVector();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(at::equal(got[0], at::tensor({3.0, 5.0, 6.0, 4.0})) && at::equal(got[1], at::tensor({6.0, 10.0, 12.0, 8.0})));
  std::vector<at::Tensor> a = {xs[0].clone()}, b = {xs[1].clone()};
  auto co_ = lists(a, b);
  Compute(Op("_c10d_functional::all_reduce_coalesced_"), co_);
  EXPECT_TRUE(at::equal(a[0], at::tensor({3.0, 5.0, 6.0, 4.0})) && at::equal(b[0], a[0]));
  // all_gather_into_tensor_out / reduce_scatter_tensor_out: the result in each member's `out`.
  std::vector<at::Tensor> outs = {at::empty({8}, at::kDouble), at::empty({8}, at::kDouble)};
  std::vector<torch::jit::Stack> gather;
  for (size_t m = 0; m < 2; ++m) gather.push_back({xs[m], c10::IValue(int64_t{2}), g, outs[m]});
  Compute(Op("_c10d_functional::all_gather_into_tensor_out"), gather);
  EXPECT_TRUE(at::equal(outs[1], at::cat({xs[0], xs[1]})));
  std::vector<at::Tensor> halves = {at::empty({2}, at::kDouble), at::empty({2}, at::kDouble)};
  std::vector<torch::jit::Stack> scatter;
  for (size_t m = 0; m < 2; ++m) scatter.push_back({xs[m], c10::IValue(std::string("sum")), c10::IValue(int64_t{2}), g, halves[m]});
  Compute(Op("_c10d_functional::reduce_scatter_tensor_out"), scatter);
  EXPECT_TRUE(at::equal(halves[0], at::tensor({4.0, 7.0})) && at::equal(halves[1], at::tensor({8.0, 4.0})));
  // The coalesced gather and reduce_scatter: position by position.
  std::vector<torch::jit::Stack> cg = {{c10::IValue(c10::List<at::Tensor>({xs[0]})), c10::IValue(int64_t{2}), g},
                                       {c10::IValue(c10::List<at::Tensor>({xs[1]})), c10::IValue(int64_t{2}), g}};
  EXPECT_TRUE(at::equal(Compute(Op("_c10d_functional::all_gather_into_tensor_coalesced"), cg)[0][0].toTensorVector()[0],
                        at::cat({xs[0], xs[1]})));
  std::vector<torch::jit::Stack> cs = {
      {c10::IValue(c10::List<at::Tensor>({xs[0]})), c10::IValue(std::string("sum")), c10::IValue(int64_t{2}), g},
      {c10::IValue(c10::List<at::Tensor>({xs[1]})), c10::IValue(std::string("sum")), c10::IValue(int64_t{2}), g}};
  EXPECT_TRUE(at::equal(Compute(Op("_c10d_functional::reduce_scatter_tensor_coalesced"), cs)[1][0].toTensorVector()[0],
                        at::tensor({8.0, 4.0})));
}

TEST(Simulated, MembersMeetByCallIndexAndAbsentRanksAreNamed) {
  auto op = Op("_c10d_functional::all_reduce");
  SimulatedWorld world(2, {{"0", {0, 1}}}, std::chrono::milliseconds(300));
  torch::jit::Stack s0{at::ones({2}), c10::IValue(std::string("sum")), c10::IValue(std::string("0"))};
  torch::jit::Stack s1{at::full({2}, 2.0), c10::IValue(std::string("sum")), c10::IValue(std::string("0"))};
  std::thread t([&] { world.Rank(1)->Call(op, s1); });
  world.Rank(0)->Call(op, s0);
  t.join();
  EXPECT_TRUE(at::equal(s0[0].toTensor(), at::full({2}, 3.0)));
  EXPECT_TRUE(at::equal(s1[0].toTensor(), at::full({2}, 3.0)));
  // Rank 1 never joins the next call: a timeout naming it and the op.
  torch::jit::Stack again{at::ones({2}), c10::IValue(std::string("sum")), c10::IValue(std::string("0"))};
  try {
    world.Rank(0)->Call(op, again);
    FAIL() << "no timeout";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("timeout after 0.3 s: collective #1 of group \"0\" (_c10d_functional::all_reduce): rank 1 never joined it"),
              std::string::npos)
        << e.what();
  }
  // A rank whose run ended fails the wait at once.
  SimulatedWorld ended(2, {{"0", {0, 1}}}, std::chrono::seconds(60));
  ended.Finished(1);
  torch::jit::Stack s{at::ones({2}), c10::IValue(std::string("sum")), c10::IValue(std::string("0"))};
  try {
    ended.Rank(0)->Call(op, s);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 ended its run without joining it"), std::string::npos) << e.what();
  }
  // A group no manifest records.
  torch::jit::Stack other{at::ones({2}), c10::IValue(std::string("sum")), c10::IValue(std::string("7"))};
  EXPECT_THROW(world.Rank(0)->Call(op, other), std::runtime_error);
}

}  // namespace
}  // namespace parity::distributed
