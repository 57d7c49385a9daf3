#include "interpreter/interpreter.h"

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

// The run loop: a Program is a graph compiled to one step per node (an op resolved by schema with
// its operands, size arithmetic, a higher-order op's kernel, ...), its subgraphs compiled to
// programs of their own; a run walks the steps over a frame local to it.
namespace parity::interp {

namespace {

using detail::Materialize;
using detail::Operand;
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
};

std::string ErrorText(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

}  // namespace

struct Program::Impl {
  const ir::Graph* graph = nullptr;
  std::vector<Step> steps;  // one per node, same index
  size_t num_ops = 0;
  detail::Subprograms subprograms;  // the graph's subgraphs, compiled
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;
const ir::Graph& Program::graph() const { return *impl_->graph; }
size_t Program::num_ops() const { return impl_->num_ops; }

namespace {

// Whether a step's own values are random numbers or uninitialized memory: an op tagged
// nondeterministic_seeded (unless it takes a dropout_p that is 0: attention's ops carry the tag
// for their dropout), an empty* allocation, or a higher-order op whose subgraph has such a value.
bool DrawsRandom(const Step& s, const detail::Subprograms& subprograms) {
  if (s.kind == StepKind::kHop) {
    for (const std::string& name : s.node->SubgraphNames()) {
      auto it = subprograms.find(name);
      if (it == subprograms.end()) continue;
      const std::vector<bool> r = it->second.RandomOutputs();
      if (std::find(r.begin(), r.end(), true) != r.end()) return true;
    }
    return false;
  }
  if (s.kind != StepKind::kOp) return false;
  const std::string name = s.op->operator_name().name;
  if (name.rfind("aten::empty", 0) == 0 || name.rfind("aten::new_empty", 0) == 0) return true;
  if (!s.op->hasTag(at::Tag::nondeterministic_seeded)) return false;
  const auto& sargs = s.op->schema().arguments();
  for (size_t k = 0; k < sargs.size() && k < s.operands.size(); ++k) {
    const Operand& o = s.operands[k];
    if (sargs[k].name() == "dropout_p" && o.kind == Operand::Kind::kConst && (o.constant.isDouble() || o.constant.isInt()))
      return o.constant.toScalar().toDouble() != 0.0;
  }
  return true;
}

}  // namespace

std::vector<bool> Program::RandomOutputs() const {
  const auto& steps = impl_->steps;
  std::vector<char> random(steps.size(), 0);
  std::vector<bool> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    random[i] = DrawsRandom(s, impl_->subprograms);
    for (const auto& o : s.operands)
      for (int r : o.refs)
        if (r >= 0 && random[r]) random[i] = 1;
    if (s.kind == StepKind::kOutput)
      for (const auto& o : s.operands) out.push_back(random[o.refs[0]] != 0);
  }
  return out;
}

namespace {

// A call_function step: the op resolved once by schema, its operands built from the node's
// arguments, keyword arguments and the schema's defaults.
Status CompileOp(const Node& n, const std::string& nw, Step& s) {
  s.kind = StepKind::kOp;
  auto [opname, overload] = n.OperatorName();
  auto handle = c10::Dispatcher::singleton().findSchema({opname, overload});
  if (!handle) {
    return Error::BadInput(nw + ": unknown op \"" + n.target() + "\" (no such operator is registered with the dispatcher)");
  }
  const c10::FunctionSchema& schema = handle->schema();
  s.batch = FindBatchKernel(handle->operator_name());
  const std::string ow = nw + " (" + n.target() + ")";
  const auto& sargs = schema.arguments();
  if (n.args.size() > sargs.size())
    return Error::BadInput(ow + ": " + std::to_string(n.args.size()) + " positional arguments, the schema takes " +
                           std::to_string(sargs.size()) + ": " + c10::toString(schema));
  std::map<std::string, const Arg*> kw;
  for (const auto& [k, v] : n.kwargs) {
    const std::string& key = k;  // clang < 16 cannot capture a structured binding
    auto it = std::find_if(sargs.begin(), sargs.end(), [&](const c10::Argument& sa) { return sa.name() == key; });
    if (it == sargs.end())
      return Error::BadInput(ow + ": unknown keyword argument \"" + k + "\" for schema " + c10::toString(schema));
    if (static_cast<size_t>(it - sargs.begin()) < n.args.size())
      return Error::BadInput(ow + ": argument \"" + k + "\" given both positionally and by keyword");
    kw[k] = &v;
  }
  for (size_t k = 0; k < sargs.size(); ++k) {
    const c10::Argument& sa = sargs[k];
    const Arg* given = k < n.args.size() ? &n.args[k] : nullptr;
    if (!given) {
      auto it = kw.find(sa.name());
      if (it != kw.end()) given = it->second;
    }
    if (!given) {
      if (!sa.default_value()) return Error::BadInput(ow + ": required argument \"" + sa.name() + "\" is missing");
      Operand o;
      o.constant = *sa.default_value();
      // A defaulted dtype/device still follows the run's float64 mode and device.
      s.operands.push_back(std::move(o));
      continue;
    }
    auto o = detail::BuildOperand(ow, sa, *given);
    if (!o.ok()) return o.error();
    s.operands.push_back(std::move(*o));
  }
  s.num_returns = schema.returns().size();
  s.op = *handle;
  return Status::Ok();
}

Status CompileSym(const Node& n, const std::string& nw, Step& s) {
  const std::string op = n.target().substr(std::string(ir::kSymNamespace).size());
  if (!detail::SymOps().count(op))
    return Error::BadInput(nw + ": unknown size operation \"" + n.target() + "\" (sym:: takes " + detail::SymOpList() + ")");
  s.kind = StepKind::kSym;
  std::vector<const Arg*> args;  // sym_sum's one list argument: its items
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::kList && op == "sym_sum")
      for (const Arg& item : a.list) args.push_back(&item);
    else
      args.push_back(&a);
  }
  while (!args.empty() && args.back()->kind == Arg::Kind::kNone) args.pop_back();  // round(x, None): a default
  for (const Arg* ap : args) {
    const Arg& a = *ap;
    Operand o;
    switch (a.kind) {
      case Arg::Kind::kNode:
        o.kind = Operand::Kind::kNode;
        o.refs = {static_cast<int>(a.node->index())};
        break;
      case Arg::Kind::kInt: o.constant = a.i; break;
      case Arg::Kind::kFloat: o.constant = a.f; break;
      case Arg::Kind::kBool: o.constant = a.b; break;
      default: return Error::BadInput(nw + " (" + n.target() + "): arguments must be sizes, numbers or booleans");
    }
    s.operands.push_back(std::move(o));
  }
  return Status::Ok();
}

// A higher-order op step: its kernel, and an operand per node it reads (for liveness).
Status CompileHopStep(const Node& n, const std::string& nw, const detail::Subprograms& subprograms, Step& s) {
  s.kind = StepKind::kHop;
  PARITY_ASSIGN_OR_RETURN(detail::HopKernel k, detail::CompileHop(n, nw + " (" + n.target() + ")", subprograms));
  s.hop = std::make_shared<const detail::HopKernel>(std::move(k));
  for (const Node* in : n.Inputs()) s.operands.push_back({Operand::Kind::kNode, {}, {static_cast<int>(in->index())}});
  return Status::Ok();
}

// Liveness: a value dies after the last step that reads it; outputs never die.
void ComputeLiveness(std::vector<Step>& steps) {
  std::vector<int> last_use(steps.size(), -1);
  for (size_t i = 0; i < steps.size(); ++i)
    for (const auto& o : steps[i].operands)
      for (int r : o.refs)
        if (r >= 0) last_use[r] = static_cast<int>(i);
  const int out_index = static_cast<int>(steps.size()) - 1;
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && last_use[v] != out_index) steps[last_use[v]].frees.push_back(static_cast<int>(v));
}

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

}  // namespace

Expected<Program> Program::Compile(const ir::Graph& graph, const std::string& where) {
  PARITY_RETURN_IF_ERROR(graph.Lint());
  auto impl = std::make_unique<Impl>();
  impl->graph = &graph;
  for (const auto& [name, sub] : graph.subgraphs) {
    PARITY_ASSIGN_OR_RETURN(Program p, Compile(*sub, where + ": subgraph \"" + name + "\""));
    impl->subprograms.emplace(name, std::move(p));
  }
  for (const Node* n : graph.nodes()) {
    Step s;
    s.node = n;
    const std::string nw = where + ": node \"" + n->name() + "\"";
    switch (n->kind()) {
      case NodeKind::kPlaceholder: {
        if (n->sym.empty()) {
          s.kind = StepKind::kInput;
          break;
        }
        s.kind = StepKind::kSymInput;
        PARITY_ASSIGN_OR_RETURN(sym::Expr e, sym::Expr::Parse(n->sym, nw));
        s.expr = std::move(e);
        break;
      }
      case NodeKind::kGetAttr: s.kind = StepKind::kAttr; break;
      case NodeKind::kOutput: {
        s.kind = StepKind::kOutput;
        for (const Node* in : n->Inputs()) s.operands.push_back({Operand::Kind::kNode, {}, {static_cast<int>(in->index())}});
        break;
      }
      case NodeKind::kCallFunction: {
        if (n->target() == ir::kGetItem) {
          s.kind = StepKind::kGetItem;
          s.operands.push_back({Operand::Kind::kNode, {}, {static_cast<int>(n->args[0].node->index())}});
          s.item = n->args[1].i;
          break;
        }
        if (ir::IsSymTarget(n->target())) {
          PARITY_RETURN_IF_ERROR(CompileSym(*n, nw, s));
          break;
        }
        if (n->IsHigherOrder()) {
          PARITY_RETURN_IF_ERROR(CompileHopStep(*n, nw, impl->subprograms, s));
          ++impl->num_ops;
          break;
        }
        PARITY_RETURN_IF_ERROR(CompileOp(*n, nw, s));
        ++impl->num_ops;
        break;
      }
    }
    impl->steps.push_back(std::move(s));
  }
  ComputeLiveness(impl->steps);
  return Program(std::move(impl));
}

namespace {

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
    s.op->callBoxed(stack);
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
