// Higher-order ops: nodes "hop::<name>" whose arguments name subgraphs (a cond's branches, a
// while_loop's condition and body, a flex_attention's score and mask functions, an
// invoke_subgraph's body, a scan's combine function). Program::Compile compiles a graph's subgraphs to programs first, then
// each higher-order node to a kernel here (one table: hops.cpp); the kernel runs the subgraphs'
// programs itself, as eager would, so the fp64 reference and autograd run through them like
// through any op. A higher-order op parity cannot run is Unsupported naming it, never a wrong
// result. Internal to interpreter/.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "interpreter/interpreter.h"
#include "repro/graph.h"
#include "util/status.h"

namespace parity::interp::detail {

// What a higher-order op's kernel gets at run time.
struct HopEnv {
  // The value of one of the node's arguments in this run: a node's value from the frame, a
  // constant as an IValue, a list as a list of those.
  std::function<c10::IValue(const ir::Arg&)> value;
  const TensorMap& attrs;
  // What subprograms run with: the run's device, dtype and grad mode (no hook, nothing recorded).
  const RunOptions& options;
};

using HopKernel = std::function<Expected<c10::IValue>(const HopEnv&)>;
using Subprograms = std::map<std::string, Program>;

// The kernel of higher-order node `n` (`where` names it in errors) of a graph whose subgraphs
// compiled to `subprograms`: checks its arguments (which are subgraphs, each subgraph's arity
// against the operands it gets). Unsupported naming the op when parity cannot run it.
[[nodiscard]] Expected<HopKernel> CompileHop(const ir::Node& n, const std::string& where, const Subprograms& subprograms);

// flex_attention by its math definition (flex_attention.cpp), as torch's eager implementation
// computes it: the score and mask subgraphs applied to the scores over broadcast (b, h, q, kv)
// index tensors.
[[nodiscard]] Expected<HopKernel> CompileFlexAttention(const ir::Node& n, const std::string& where, const Subprograms& subprograms);

// The names of the table's ops (sorted): repro/hop_check.h's KnownHigherOrderOps, the ops a
// file may call, are exactly these (a unit test says so).
std::vector<std::string> RunnableHigherOrderOps();

// A subgraph argument's program; BadInput naming `where` when the argument names none.
[[nodiscard]] Expected<const Program*> SubprogramOf(const ir::Arg& a, const std::string& where, const Subprograms& subprograms);
// The items of a list value (a HopEnv::value of a list argument); one value when it is no list.
std::vector<c10::IValue> Items(const c10::IValue& v);

}  // namespace parity::interp::detail
