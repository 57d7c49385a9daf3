#include "interpreter/program_steps.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <optional>

#include "interpreter/batch.h"
#include "interpreter/hops.h"
#include "interpreter/layout.h"
#include "interpreter/operands.h"
#include "interpreter/sym_ops.h"

// The run loop: a run walks a compiled Program's steps (program_steps.h) over a frame local to it.
namespace parity::interp {

using namespace detail;

namespace {

// A getitem step's value: element `item` of a tuple or list.
Expected<c10::IValue> GetItem(const c10::IValue& v, int64_t item, const Node& n) {
  if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    if (item < 0 || static_cast<size_t>(item) >= el.size())
      return Error::Runtime("node \"" + n.name() + "\": getitem index out of range");
    return el[item];
  }
  if (v.isList()) {
    auto l = v.toListRef();
    if (item < 0 || static_cast<size_t>(item) >= l.size())
      return Error::Runtime("node \"" + n.name() + "\": getitem index out of range");
    return l[item];
  }
  return Error::Runtime("node \"" + n.name() + "\": getitem on a value that is not a tuple or list");
}


bool OneTensorReturn(const c10::OperatorHandle& op) {
  const auto& rets = op.schema().returns();
  return rets.size() == 1 && rets[0].type()->kind() == c10::TypeKind::TensorType;
}

// Runs the calls from step `first` on that share its batch kernel (with the getitems of their
// results between them) in one go, when there are at least two: their values go to `frame` and
// `computed`. An argument that is an earlier call's Tensor result travels as a BatchRef; a call
// that takes such a result in any other way (inside a list) ends the run before it.
bool RunBatch(const std::vector<Step>& steps, size_t first, std::vector<c10::IValue>& frame, std::vector<char>& computed,
              const RunOptions& options) {
  const auto& kernel = steps[first].batch;
  std::vector<BatchCall> calls;
  std::vector<size_t> call_steps;
  std::unordered_map<int, std::pair<size_t, int64_t>> produced;  // step -> (call, output)
  for (size_t k = first; k < steps.size(); ++k) {
    const Step& s = steps[k];
    if (s.kind == StepKind::kGetItem) {
      auto it = produced.find(s.operands[0].refs[0]);
      if (it == produced.end() || it->second.second != -2) break;  // items of a call's tuple or list only
      produced[static_cast<int>(k)] = {it->second.first, s.item};
      continue;
    }
    if (s.kind != StepKind::kOp || s.batch != kernel) break;
    BatchCall call;
    call.op = &*s.op;
    bool takes = true;
    for (size_t a = 0; a < s.operands.size() && takes; ++a) {
      const Operand& o = s.operands[a];
      auto it = o.kind == Operand::Kind::kNode ? produced.find(o.refs[0]) : produced.end();
      if (it != produced.end()) {
        const auto [from, output] = it->second;
        takes = output >= -1;  // a Tensor: the call's one return or an item of its returns
        call.refs.push_back({a, from, output});
        call.args.emplace_back();
        continue;
      }
      for (int r : o.refs) takes = takes && !produced.count(r);
      if (takes) call.args.push_back(Materialize(o, frame, options));
    }
    if (!takes) break;
    // A call whose value is a tuple or list is referenced through its getitems only.
    produced[static_cast<int>(k)] = {calls.size(), OneTensorReturn(*s.op) ? -1 : -2};
    calls.push_back(std::move(call));
    call_steps.push_back(k);
  }
  if (calls.size() < 2) return false;
  std::vector<torch::jit::Stack> results = (*kernel)(calls);
  for (size_t c = 0; c < calls.size(); ++c) {
    const size_t k = call_steps[c];
    frame[k] = steps[k].num_returns == 1 ? std::move(results.at(c).at(0)) : c10::ivalue::Tuple::create(std::move(results.at(c)));
    computed[k] = 1;
  }
  return true;
}

// One op step: its call (or the batch run it starts, or nothing when a batch ran it already),
// the fp64 run's relayout and the node hook.
Status RunOp(const std::vector<Step>& steps, size_t i, std::vector<c10::IValue>& frame, std::vector<char>& computed,
             const RunOptions& options) {
  const Step& s = steps[i];
  // Batched calls ran with the first of their run; without autograd and hooks only (a hook may
  // replace a value a later call of the run would have taken).
  const bool batched =
      computed[i] || (s.batch && !options.grad && !options.hook && RunBatch(steps, i, frame, computed, options));
  if (!batched) {
    torch::jit::Stack stack;
    stack.reserve(s.operands.size());
    for (const auto& o : s.operands) stack.push_back(Materialize(o, frame, options));
    if (!s.collective) {
      s.op->callBoxed(stack);
    } else if (options.collectives) {
      options.collectives->Call(*s.op, stack);
    } else {
      throw std::runtime_error("a collective, computed only when the graph runs as one rank of a multi-rank repro dir "
                               "(parity repro run DIR, DIR the capture's dir of every rank)");
    }
    if (s.num_returns == 1)
      frame[i] = std::move(stack[0]);
    else
      frame[i] = c10::ivalue::Tuple::create(std::move(stack));
  }
  if (options.float_dtype) {
    detail::FollowFloatDtype(frame[i], *options.float_dtype);
    detail::RelayoutValue(frame[i], *s.node);
  }
  if (options.hook) return options.hook(*s.node, frame[i]);
  return Status::Ok();
}

// An output as every consumer can read it: a ZeroTensor (`_efficientzerotensor`, autograd's
// zero gradients) has no storage to read, so it leaves the run as an ordinary tensor of zeros;
// a number the graph returns (a size, `.item()`) leaves as a 0-dim int64, float64 or bool
// tensor, as the capture stores it (docs/format.md).
c10::IValue Materialized(const c10::IValue& v) {
  if (v.isTensor() && v.toTensor().defined() && v.toTensor()._is_zerotensor())
    return at::zeros(v.toTensor().sizes(), v.toTensor().options());
  if (v.isInt()) return at::scalar_tensor(v.toInt(), at::kLong);
  if (v.isDouble()) return at::scalar_tensor(v.toDouble(), at::kDouble);
  if (v.isBool()) return at::scalar_tensor(v.toBool(), at::kBool);
  return v;
}

// Which steps' values a run records: all, or the nodes options.record names (BadInput naming
// one the graph lacks).
Expected<std::vector<char>> KeptSteps(const ir::Graph& graph, size_t steps, const RunOptions& options) {
  std::vector<char> keep(steps, options.record_all ? 1 : 0);
  for (const auto& name : options.record) {
    const Node* n = graph.Find(name);
    if (!n) return Error::BadInput("record: no node named \"" + name + "\" in graph \"" + graph.name() + "\"");
    keep[n->index()] = 1;
  }
  return keep;
}

// The value of a higher-order op's argument in this run: node values from the frame, constants
// as IValues, lists as lists.
c10::IValue HopArgValue(const Arg& a, const std::vector<c10::IValue>& frame) {
  switch (a.kind) {
    case Arg::Kind::kNone: return {};
    case Arg::Kind::kBool: return a.b;
    case Arg::Kind::kInt: return a.i;
    case Arg::Kind::kFloat: return a.f;
    case Arg::Kind::kString: return a.s;
    case Arg::Kind::kNode: return frame[a.node->index()];
    case Arg::Kind::kList: {
      c10::impl::GenericList l(c10::AnyType::get());
      for (const auto& x : a.list) l.push_back(HopArgValue(x, frame));
      return l;
    }
    case Arg::Kind::kDtype: return a.dtype;
    case Arg::Kind::kDevice: return a.device;
    case Arg::Kind::kLayout: return a.layout;
    case Arg::Kind::kMemoryFormat: return a.memory_format;
    case Arg::Kind::kSubgraph: return a.s;  // kernels hold their subprograms; the name is what is left
    case Arg::Kind::kDict: {
      c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
      for (size_t k = 0; k < a.keys.size(); ++k) d.insert(a.keys[k], HopArgValue(a.list[k], frame));
      return d;
    }
  }
  return {};
}

}  // namespace

// Where a run's placeholders take their values: by name (a graph's run) or by position (a
// subgraph's run, its operands in order).
struct Program::Inputs {
  const TensorMap* named = nullptr;
  const std::vector<c10::IValue>* positional = nullptr;
};

Expected<RunResult> Program::Run(const TensorMap& inputs, const TensorMap& attrs, const RunOptions& options) const {
  sym::Bindings symbols;
  if (impl_->graph->symbolic()) {
    PARITY_ASSIGN_OR_RETURN(symbols, BindSymbols(*impl_->graph, inputs));
  }
  Inputs in;
  in.named = &inputs;
  return RunSteps(in, attrs, options, symbols);
}

Expected<std::vector<c10::IValue>> Program::RunPositional(const std::vector<c10::IValue>& inputs, const TensorMap& attrs,
                                                          const RunOptions& options) const {
  const auto placeholders = impl_->graph->placeholders();
  if (inputs.size() != placeholders.size())
    return Error::BadInput("graph \"" + impl_->graph->name() + "\" takes " + std::to_string(placeholders.size()) +
                           " operands, its higher-order op gave " + std::to_string(inputs.size()));
  Inputs in;
  in.positional = &inputs;
  PARITY_ASSIGN_OR_RETURN(RunResult r, RunSteps(in, attrs, options, {}));
  return std::move(r.outputs);
}

Expected<RunResult> Program::RunSteps(const Inputs& in, const TensorMap& attrs, const RunOptions& options,
                                      const sym::Bindings& symbols) const {
  std::optional<c10::InferenceMode> inference;
  if (!options.grad) inference.emplace();
  const auto& steps = impl_->steps;
  std::vector<c10::IValue> frame(steps.size());
  std::vector<char> computed(steps.size(), 0);  // op steps a batch kernel ran ahead
  PARITY_ASSIGN_OR_RETURN(std::vector<char> keep, KeptSteps(*impl_->graph, steps.size(), options));
  RunResult result;
  // Subgraphs run as the graph does, its node hook too (a fault injected into an op reaches the
  // op inside a cond branch, a scan's body, a checkpointed block); nothing of them is recorded.
  RunOptions sub_options = options;
  sub_options.record.clear();
  sub_options.record_all = false;
  size_t position = 0;  // the next positional input

  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const Node& n = *s.node;
    try {
      switch (s.kind) {
        case StepKind::kSymInput: {
          if (in.positional) {
            frame[i] = (*in.positional)[position++];
            break;
          }
          PARITY_ASSIGN_OR_RETURN(double v, s.expr->Eval(symbols));
          frame[i] = n.sym_type == "float" ? c10::IValue(v) : n.sym_type == "bool" ? c10::IValue(v != 0) : c10::IValue(static_cast<int64_t>(v));
          break;
        }
        case StepKind::kSym: {
          std::vector<c10::IValue> vals;
          for (const auto& o : s.operands) vals.push_back(Materialize(o, frame, options));
          PARITY_ASSIGN_OR_RETURN(frame[i], detail::EvalSym(n.target(), vals, "graph \"" + impl_->graph->name() + "\": node \"" + n.name() + "\""));
          break;
        }
        case StepKind::kInput: {
          if (in.positional) {  // a subgraph's operand: already in the run's dtype and on its device
            frame[i] = (*in.positional)[position++];
            break;
          }
          auto it = in.named->find(n.name());
          if (it == in.named->end())
            return Error::BadInput("graph \"" + impl_->graph->name() + "\": no input for placeholder \"" + n.name() + "\"");
          frame[i] = WithCapturedLayout(PrepareTensor(it->second, options), n.meta.empty() ? std::nullopt : n.meta[0]);
          break;
        }
        case StepKind::kAttr: {
          auto it = attrs.find(n.target());
          if (it == attrs.end())
            return Error::BadInput("graph \"" + impl_->graph->name() + "\": no tensor for get_attr \"" + n.target() + "\"");
          frame[i] = WithCapturedLayout(PrepareTensor(it->second, options), n.meta.empty() ? std::nullopt : n.meta[0]);
          break;
        }
        case StepKind::kGetItem: {
          PARITY_ASSIGN_OR_RETURN(frame[i], GetItem(frame[s.operands[0].refs[0]], s.item, n));
          break;
        }
        case StepKind::kOp: {
          PARITY_RETURN_IF_ERROR(RunOp(steps, i, frame, computed, options));
          break;
        }
        case StepKind::kHop: {
          detail::HopEnv env{[&frame](const Arg& a) { return HopArgValue(a, frame); }, attrs, sub_options};
          PARITY_ASSIGN_OR_RETURN(frame[i], (*s.hop)(env));
          // Its results in the layouts the capture recorded (torch's kernel lays flex_attention's
          // output out like the query; a later view may be legal only on that layout).
          detail::RelayoutValue(frame[i], n);
          if (options.hook) PARITY_RETURN_IF_ERROR(options.hook(n, frame[i]));
          break;
        }
        case StepKind::kOutput: {
          // A subgraph's outputs go back to its higher-order op as they are (a size stays a size).
          for (const auto& o : s.operands)
            result.outputs.push_back(in.positional ? frame[o.refs[0]] : Materialized(frame[o.refs[0]]));
          break;
        }
      }
    } catch (const std::exception& e) {
      return Error::Runtime("node \"" + n.name() + "\" (" + n.target() + "): " + ErrorText(e));
    }
    if (keep[i] && s.kind != StepKind::kOutput) result.values[n.name()] = frame[i];
    for (int v : s.frees) frame[v] = c10::IValue();
  }
  return result;
}

}  // namespace parity::interp
