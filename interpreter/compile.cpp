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

// The compile: a graph to one step per node (an op resolved by schema with its operands, size
// arithmetic, a higher-order op's kernel, ...), its subgraphs compiled to programs of their own.
namespace parity::interp {

using namespace detail;

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

// The dispatcher's op a call_function node names; BadInput naming it where there is none.
Expected<c10::OperatorHandle> FindOp(const Node& n, const std::string& nw) {
  auto [opname, overload] = n.OperatorName();
  auto handle = c10::Dispatcher::singleton().findSchema({opname, overload});
  if (!handle) return Error::BadInput(nw + ": unknown op \"" + n.target() + "\" (no such operator is registered with the dispatcher)");
  return *handle;
}

// A call_function step: the op resolved once by schema, its operands built from the node's
// arguments, keyword arguments and the schema's defaults.
Status CompileOp(const Node& n, const std::string& nw, Step& s) {
  s.kind = StepKind::kOp;
  PARITY_ASSIGN_OR_RETURN(c10::OperatorHandle handle, FindOp(n, nw));
  const c10::FunctionSchema& schema = handle.schema();
  s.batch = FindBatchKernel(handle.operator_name());
  s.collective = IsCollective(n.OperatorName().first);
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
  s.op = handle;
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

}  // namespace

Status CheckOpsKnown(const ir::Graph& graph, const std::string& where, const std::set<std::string>& registered_later) {
  for (const auto& [name, sub] : graph.subgraphs)
    PARITY_RETURN_IF_ERROR(CheckOpsKnown(*sub, where + ": subgraph \"" + name + "\"", registered_later));
  for (const Node* n : graph.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || n->target() == ir::kGetItem || ir::IsSymTarget(n->target()) ||
        n->IsHigherOrder() || registered_later.count(n->target()))
      continue;
    if (auto op = FindOp(*n, where + ": node \"" + n->name() + "\""); !op.ok()) return op.error();
  }
  return Status::Ok();
}

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

}  // namespace parity::interp
