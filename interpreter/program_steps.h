// What a compiled Program is made of, shared by its compile (compile.cpp) and its run loop
// (program.cpp): one step per node, and the subgraphs compiled to programs of their own.
// Internal to interpreter/.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/batch.h"
#include "interpreter/hops.h"
#include "interpreter/interpreter.h"
#include "interpreter/operands.h"
#include "interpreter/sym_ops.h"

namespace parity::interp {

namespace detail {
using ir::Arg;
using ir::Node;
using ir::NodeKind;

// kSymInput: a size placeholder, its value the expression `expr` over the run's symbols;
// kSym: size arithmetic (a sym:: target) over its operands; kHop: a higher-order op's kernel.
enum class StepKind { kInput, kAttr, kOp, kGetItem, kOutput, kSymInput, kSym, kHop };

struct Step {
  StepKind kind;
  const Node* node = nullptr;
  std::optional<c10::OperatorHandle> op;
  std::vector<Operand> operands;  // kHop: one per node the op reads (liveness)
  size_t num_returns = 0;
  int64_t item = 0;        // getitem index
  std::vector<int> frees;  // node indices whose values die after this step
  std::optional<sym::Expr> expr;  // kSymInput
  std::shared_ptr<const BatchKernel> batch;  // kOp: the op's batch kernel, if it has one
  std::shared_ptr<const detail::HopKernel> hop;  // kHop
  bool collective = false;  // kOp: a `_c10d_functional` op, computed by RunOptions::collectives
};

inline std::string ErrorText(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

}  // namespace detail

struct Program::Impl {
  const ir::Graph* graph = nullptr;
  std::vector<detail::Step> steps;  // one per node, same index
  size_t num_ops = 0;
  detail::Subprograms subprograms;  // the graph's subgraphs, compiled
};

}  // namespace parity::interp
