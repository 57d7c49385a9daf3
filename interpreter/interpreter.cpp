#include "interpreter/interpreter.h"

#include "interpreter/batch.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/jit_type.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>

namespace parity::interp {

namespace {

using ir::Arg;
using ir::Node;
using ir::NodeKind;

// How one stack slot is produced at run time.
struct Operand {
  enum class Kind {
    kConst,          // `constant`
    kDtype,          // `constant` is a ScalarType; float64 mode widens floating ones
    kDevice,         // `constant` is a Device; replaced by the run's device
    kNode,           // the value of node `refs[0]`
    kTensorList,     // Tensor[] gathered from `refs`
    kOptTensorList,  // Tensor?[] gathered from `refs` (-1 = None)
    kIntList,        // int[] of sizes: `ints[k]`, or the size value of node `refs[k]` where it is >= 0
    kNumberTensor,   // a Tensor argument given a size value (node `refs[0]`): a wrapped number, as Python does
  };
  Kind kind = Kind::kConst;
  c10::IValue constant;
  std::vector<int> refs;
  std::vector<int64_t> ints = {};
};

// kSymInput: a size placeholder, its value the expression `expr` over the run's symbols;
// kSym: size arithmetic (a sym:: target) over its operands.
enum class StepKind { kInput, kAttr, kOp, kGetItem, kOutput, kSymInput, kSym };

struct Step {
  StepKind kind;
  const Node* node = nullptr;
  std::optional<c10::OperatorHandle> op;
  std::vector<Operand> operands;
  size_t num_returns = 0;
  int64_t item = 0;        // getitem index
  std::vector<int> frees;  // node indices whose values die after this step
  std::optional<sym::Expr> expr;  // kSymInput
  std::shared_ptr<const BatchKernel> batch;  // kOp: the op's batch kernel, if it has one
};

struct BatchRegistry {
  std::mutex mu;
  std::unordered_map<c10::OperatorName, std::shared_ptr<const BatchKernel>> kernels;
};
BatchRegistry& Batches() {
  static BatchRegistry r;
  return r;
}

bool IsFloatingDtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kHalf || t == c10::kBFloat16 || t == c10::kDouble;
}

// The dtype a value of dtype `t` takes in a run of floating dtype `run` (the fp64 reference): a
// floating one takes `run`, a complex one run's complex counterpart (complex64 -> complex128 in
// float64), anything else stays. The one rule inputs, dtype arguments and results all follow.
c10::ScalarType Followed(c10::ScalarType t, c10::ScalarType run) {
  if (IsFloatingDtype(t)) return run;
  if (c10::isComplexType(t) && (run == c10::kDouble || run == c10::kFloat || run == c10::kHalf)) return c10::toComplexType(run);
  return t;
}

// A Python number where a Tensor is expected (a constant, or a size computed at run time): a
// 0-dim tensor flagged as a wrapped number, so type promotion treats it as torch does a scalar
// (an int does not make a float tensor double; a float does not widen a float32 tensor).
at::Tensor WrappedNumber(const c10::IValue& v) {
  at::Tensor t = v.isInt()      ? at::scalar_tensor(v.toInt(), at::kLong)
                 : v.isDouble() ? at::scalar_tensor(v.toDouble(), at::kDouble)
                                : at::scalar_tensor(v.toBool(), at::kBool);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

std::string Describe(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::kNone: return "None";
    case Arg::Kind::kBool: return "a bool";
    case Arg::Kind::kInt: return "an int";
    case Arg::Kind::kFloat: return "a float";
    case Arg::Kind::kString: return "a string";
    case Arg::Kind::kNode: return "node %" + a.node->name();
    case Arg::Kind::kList: return "a list";
    case Arg::Kind::kDtype: return "a dtype";
    case Arg::Kind::kDevice: return "a device";
    case Arg::Kind::kLayout: return "a layout";
    case Arg::Kind::kMemoryFormat: return "a memory_format";
  }
  return "?";
}

class OperandBuilder {
 public:
  OperandBuilder(std::string where) : where_(std::move(where)) {}

  Expected<Operand> Build(const c10::Argument& schema_arg, const Arg& a) {
    arg_name_ = schema_arg.name();
    return Convert(schema_arg.real_type(), a, schema_arg.N());
  }

 private:
  Error Mismatch(const c10::TypePtr& type, const Arg& a) const {
    return Error::BadInput(where_ + ": argument \"" + arg_name_ + "\": expected " + type->str() + ", got " + Describe(a));
  }

  static Operand Const(c10::IValue v) {
    Operand o;
    o.constant = std::move(v);
    return o;
  }
  static Operand Ref(const Arg& a) {
    Operand o;
    o.kind = Operand::Kind::kNode;
    o.refs = {static_cast<int>(a.node->index())};
    return o;
  }

  Expected<Operand> Convert(const c10::TypePtr& type, const Arg& a, std::optional<int32_t> n) {
    using K = c10::TypeKind;
    switch (type->kind()) {
      case K::OptionalType:
        if (a.kind == Arg::Kind::kNone) return Const(c10::IValue());
        return Convert(type->castRaw<c10::OptionalType>()->getElementType(), a, n);
      case K::TensorType:
        if (a.kind == Arg::Kind::kNode && !a.node->sym.empty()) {  // `out * x.shape[0]`: a SymInt/SymFloat operand
          Operand o = Ref(a);
          o.kind = Operand::Kind::kNumberTensor;
          return o;
        }
        if (a.kind == Arg::Kind::kNode) {
          Operand o;
          o.kind = Operand::Kind::kNode;
          o.refs = {static_cast<int>(a.node->index())};
          return o;
        }
        // A Python number in a Tensor position: a wrapped-number 0-dim tensor, as torch does.
        if (a.kind == Arg::Kind::kInt) return Const(WrappedNumber(c10::IValue(a.i)));
        if (a.kind == Arg::Kind::kFloat) return Const(WrappedNumber(c10::IValue(a.f)));
        if (a.kind == Arg::Kind::kBool) return Const(WrappedNumber(c10::IValue(a.b)));
        return Mismatch(type, a);
      case K::ListType: {
        const c10::TypePtr& elem = type->castRaw<c10::ListType>()->getElementType();
        if (elem->kind() == K::TensorType ||
            (elem->kind() == K::OptionalType && elem->castRaw<c10::OptionalType>()->getElementType()->kind() == K::TensorType)) {
          const bool optional = elem->kind() == K::OptionalType;
          if (a.kind != Arg::Kind::kList) return Mismatch(type, a);
          Operand o;
          o.kind = optional ? Operand::Kind::kOptTensorList : Operand::Kind::kTensorList;
          for (const auto& x : a.list) {
            if (x.kind == Arg::Kind::kNode)
              o.refs.push_back(static_cast<int>(x.node->index()));
            else if (optional && x.kind == Arg::Kind::kNone)
              o.refs.push_back(-1);
            else
              return Mismatch(type, a);
          }
          return o;
        }
        std::vector<Arg> items;
        if (a.kind == Arg::Kind::kList)
          items = a.list;
        else if (n && (a.kind == Arg::Kind::kInt || a.kind == Arg::Kind::kBool || a.kind == Arg::Kind::kFloat))
          items.assign(static_cast<size_t>(*n), a);  // int[2] stride=1 means [1, 1]
        else
          return Mismatch(type, a);
        switch (elem->kind()) {
          case K::IntType:
          case K::SymIntType: {
            const bool sizes = std::any_of(items.begin(), items.end(), [](const Arg& x) { return x.kind == Arg::Kind::kNode; });
            if (sizes) {  // a shape of a symbolic graph: constants and size values
              Operand o;
              o.kind = Operand::Kind::kIntList;
              for (const auto& x : items) {
                if (x.kind == Arg::Kind::kNode) {
                  o.refs.push_back(static_cast<int>(x.node->index()));
                  o.ints.push_back(0);
                } else if (x.kind == Arg::Kind::kInt) {
                  o.refs.push_back(-1);
                  o.ints.push_back(x.i);
                } else {
                  return Mismatch(type, a);
                }
              }
              return o;
            }
            c10::List<int64_t> l;
            for (const auto& x : items) {
              if (x.kind != Arg::Kind::kInt) return Mismatch(type, a);
              l.push_back(x.i);
            }
            return Const(l);
          }
          case K::FloatType: {
            c10::List<double> l;
            for (const auto& x : items) {
              if (x.kind == Arg::Kind::kFloat)
                l.push_back(x.f);
              else if (x.kind == Arg::Kind::kInt)
                l.push_back(static_cast<double>(x.i));
              else
                return Mismatch(type, a);
            }
            return Const(l);
          }
          case K::BoolType: {
            c10::List<bool> l;
            for (const auto& x : items) {
              if (x.kind != Arg::Kind::kBool) return Mismatch(type, a);
              l.push_back(x.b);
            }
            return Const(l);
          }
          default:
            return Error::Unsupported(where_ + ": argument \"" + arg_name_ + "\": list type " + type->str() +
                                      " is not supported");
        }
      }
      case K::IntType:
      case K::SymIntType:
        if (a.kind == Arg::Kind::kInt) return Const(a.i);
        if (a.kind == Arg::Kind::kNode && !a.node->sym.empty()) return Ref(a);  // a size value
        return Mismatch(type, a);
      case K::FloatType:
      case K::SymFloatType:
        if (a.kind == Arg::Kind::kFloat) return Const(a.f);
        if (a.kind == Arg::Kind::kInt) return Const(static_cast<double>(a.i));
        if (a.kind == Arg::Kind::kNode && !a.node->sym.empty()) return Ref(a);
        return Mismatch(type, a);
      case K::BoolType:
      case K::SymBoolType:
        if (a.kind == Arg::Kind::kBool) return Const(a.b);
        if (a.kind == Arg::Kind::kNode && !a.node->sym.empty()) return Ref(a);
        return Mismatch(type, a);
      case K::NumberType:
        if (a.kind == Arg::Kind::kNode && !a.node->sym.empty()) return Ref(a);
        if (a.kind == Arg::Kind::kInt) return Const(c10::Scalar(a.i));
        if (a.kind == Arg::Kind::kFloat) return Const(c10::Scalar(a.f));
        if (a.kind == Arg::Kind::kBool) return Const(c10::Scalar(a.b));
        return Mismatch(type, a);
      case K::StringType:
        if (a.kind == Arg::Kind::kString) return Const(a.s);
        return Mismatch(type, a);
      case K::ScalarTypeType:
        if (a.kind == Arg::Kind::kDtype) {
          Operand o = Const(a.dtype);
          o.kind = Operand::Kind::kDtype;
          return o;
        }
        return Mismatch(type, a);
      case K::LayoutType:
        if (a.kind == Arg::Kind::kLayout) return Const(a.layout);
        return Mismatch(type, a);
      case K::MemoryFormatType:
        if (a.kind == Arg::Kind::kMemoryFormat) return Const(a.memory_format);
        return Mismatch(type, a);
      case K::DeviceObjType:
        if (a.kind == Arg::Kind::kDevice) {
          Operand o = Const(a.device);
          o.kind = Operand::Kind::kDevice;
          return o;
        }
        return Mismatch(type, a);
      case K::GeneratorType:
        if (a.kind == Arg::Kind::kNone) return Const(c10::IValue());
        return Mismatch(type, a);
      default:
        return Error::Unsupported(where_ + ": argument \"" + arg_name_ + "\": type " + type->str() +
                                  " is not supported by the interpreter");
    }
  }

  std::string where_;
  std::string arg_name_;
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
};

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;
const ir::Graph& Program::graph() const { return *impl_->graph; }
size_t Program::num_ops() const { return impl_->num_ops; }

std::vector<bool> Program::RandomOutputs() const {
  const auto& steps = impl_->steps;
  std::vector<char> random(steps.size(), 0);
  std::vector<bool> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind == StepKind::kOp) {
      const std::string name = s.op->operator_name().name;
      random[i] = s.op->hasTag(at::Tag::nondeterministic_seeded) || name.rfind("aten::empty", 0) == 0 ||
                  name.rfind("aten::new_empty", 0) == 0;
    }
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
  OperandBuilder builder(ow);
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
    auto o = builder.Build(sa, *given);
    if (!o.ok()) return o.error();
    s.operands.push_back(std::move(*o));
  }
  s.num_returns = schema.returns().size();
  s.op = *handle;
  return Status::Ok();
}

// Size arithmetic: the operator (sym::mul, ...) and operands that are constants or size values.
const std::set<std::string>& SymOps() {
  static const std::set<std::string> ops = {"add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "pos",
                                            "abs", "eq",  "ne",  "lt",  "le",       "gt",      "ge",  "and", "or",
                                            "not", "max", "min", "float", "int",    "ceil",    "floor", "sym_ite"};
  return ops;
}

Status CompileSym(const Node& n, const std::string& nw, Step& s) {
  const std::string op = n.target().substr(std::string(ir::kSymNamespace).size());
  if (!SymOps().count(op))
    return Error::BadInput(nw + ": unknown size operation \"" + n.target() + "\" (sym:: takes add, sub, mul, floordiv, truediv, "
                           "mod, pow, neg, pos, abs, eq, ne, lt, le, gt, ge, and, or, not, max, min, float, int, ceil, floor, "
                           "sym_ite)");
  s.kind = StepKind::kSym;
  for (const Arg& a : n.args) {
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

// One size operation in Python's semantics (floor division and modulo round toward -inf; an
// int op int stays int, any float makes a float, comparisons give bools).
Expected<c10::IValue> EvalSym(const std::string& target, const std::vector<c10::IValue>& v, const std::string& where) {
  const std::string op = target.substr(std::string(ir::kSymNamespace).size());
  auto num = [](const c10::IValue& x) { return x.isDouble() ? x.toDouble() : x.isBool() ? (x.toBool() ? 1.0 : 0.0) : static_cast<double>(x.toInt()); };
  auto integral = [](const c10::IValue& x) { return x.isInt() || x.isBool(); };
  auto as_int = [](const c10::IValue& x) { return x.isBool() ? static_cast<int64_t>(x.toBool()) : x.toInt(); };
  for (const auto& x : v)
    if (!x.isInt() && !x.isDouble() && !x.isBool())
      return Error::Runtime(where + ": " + target + " of a " + x.tagKind() + " (sizes, numbers and booleans only)");
  const size_t arity = v.size();
  auto need = [&](size_t k) -> Status {
    if (arity != k) return Error::BadInput(where + ": " + target + " takes " + std::to_string(k) + " argument(s)");
    return Status::Ok();
  };
  if (op == "neg" || op == "pos" || op == "abs" || op == "not" || op == "float" || op == "int" || op == "ceil" || op == "floor") {
    PARITY_RETURN_IF_ERROR(need(1));
    const c10::IValue& x = v[0];
    if (op == "not") return c10::IValue(num(x) == 0);
    if (op == "float") return c10::IValue(num(x));
    if (op == "int") return c10::IValue(static_cast<int64_t>(std::trunc(num(x))));
    if (op == "ceil") return c10::IValue(static_cast<int64_t>(std::ceil(num(x))));
    if (op == "floor") return c10::IValue(static_cast<int64_t>(std::floor(num(x))));
    if (integral(x)) {
      const int64_t i = as_int(x);
      return c10::IValue(op == "neg" ? -i : op == "abs" ? (i < 0 ? -i : i) : i);
    }
    const double d = num(x);
    return c10::IValue(op == "neg" ? -d : op == "abs" ? std::fabs(d) : d);
  }
  if (op == "sym_ite") {
    PARITY_RETURN_IF_ERROR(need(3));
    return num(v[0]) != 0 ? v[1] : v[2];
  }
  if ((op == "max" || op == "min") && arity >= 1) {
    c10::IValue best = v[0];
    for (const auto& x : v)
      if (op == "max" ? num(x) > num(best) : num(x) < num(best)) best = x;
    return best;
  }
  PARITY_RETURN_IF_ERROR(need(2));
  const c10::IValue &x = v[0], &y = v[1];
  const double a = num(x), b = num(y);
  if (op == "eq") return c10::IValue(a == b);
  if (op == "ne") return c10::IValue(a != b);
  if (op == "lt") return c10::IValue(a < b);
  if (op == "le") return c10::IValue(a <= b);
  if (op == "gt") return c10::IValue(a > b);
  if (op == "ge") return c10::IValue(a >= b);
  if (op == "and") return c10::IValue(a != 0 && b != 0);
  if (op == "or") return c10::IValue(a != 0 || b != 0);
  if ((op == "floordiv" || op == "mod" || op == "truediv") && b == 0) return Error::Runtime(where + ": " + target + " by zero");
  if (op == "truediv") return c10::IValue(a / b);
  const bool ints = integral(x) && integral(y);
  if (ints) {
    const int64_t i = as_int(x), j = as_int(y);
    if (op == "add") return c10::IValue(i + j);
    if (op == "sub") return c10::IValue(i - j);
    if (op == "mul") return c10::IValue(i * j);
    if (op == "floordiv") return c10::IValue(static_cast<int64_t>(std::floor(static_cast<double>(i) / static_cast<double>(j))));
    if (op == "mod") return c10::IValue(i - j * static_cast<int64_t>(std::floor(static_cast<double>(i) / static_cast<double>(j))));
    if (op == "pow" && j >= 0) return c10::IValue(static_cast<int64_t>(std::llround(std::pow(static_cast<double>(i), static_cast<double>(j)))));
  }
  if (op == "add") return c10::IValue(a + b);
  if (op == "sub") return c10::IValue(a - b);
  if (op == "mul") return c10::IValue(a * b);
  if (op == "floordiv") return c10::IValue(std::floor(a / b));
  if (op == "mod") return c10::IValue(a - b * std::floor(a / b));
  if (op == "pow") return c10::IValue(std::pow(a, b));
  return Error::BadInput(where + ": unknown size operation " + target);
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

// An operand's value for this run: constants as compiled, dtypes and devices following the
// run's float64 mode and device, node values from the frame.
inline c10::IValue Materialize(const Operand& o, const std::vector<c10::IValue>& frame, const RunOptions& options) {
  switch (o.kind) {
    case Operand::Kind::kConst: return o.constant;
    case Operand::Kind::kDtype: {
      auto t = static_cast<c10::ScalarType>(o.constant.toInt());
      if (options.float_dtype) t = Followed(t, *options.float_dtype);
      return t;
    }
    case Operand::Kind::kDevice: return options.device;
    case Operand::Kind::kNode: return frame[o.refs[0]];
    case Operand::Kind::kNumberTensor: {
      const c10::IValue& v = frame[o.refs[0]];
      return v.isTensor() ? v : c10::IValue(WrappedNumber(v));
    }
    case Operand::Kind::kTensorList: {
      c10::List<at::Tensor> l;
      l.reserve(o.refs.size());
      for (int r : o.refs) l.push_back(frame[r].toTensor());
      return l;
    }
    case Operand::Kind::kIntList: {
      c10::List<int64_t> l;
      l.reserve(o.refs.size());
      for (size_t k = 0; k < o.refs.size(); ++k) l.push_back(o.refs[k] < 0 ? o.ints[k] : frame[o.refs[k]].toInt());
      return l;
    }
    case Operand::Kind::kOptTensorList: {
      c10::List<std::optional<at::Tensor>> l;
      l.reserve(o.refs.size());
      for (int r : o.refs) l.push_back(r < 0 ? std::optional<at::Tensor>() : std::optional<at::Tensor>(frame[r].toTensor()));
      return l;
    }
  }
  return {};
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

namespace {

// Whether `stride` lays out a tensor of `shape` densely without overlap (what empty_strided
// can hold and copy_ can write): sorted by stride, each dim's stride is the product of the
// sizes of the dims inside it. Dims of size 1 may have any stride.
bool DenseLayout(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return stride[a] < stride[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (shape[d] == 0) return false;
    if (stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// The one rule of a float-dtype run (the fp64 reference) for values the graph makes itself: a
// floating result in another floating dtype becomes the run's dtype. Inputs, parameters and
// dtype arguments follow it already (PrepareTensor, Operand::kDtype); this catches what the
// graph pins by default: factory ops with dtype=None (zeros, full, scalar_tensor: float32), so
// a buffer made in the graph, an index_put_/scatter destination or source and the checks of
// _assert_tensor_metadata all meet tensors of one dtype.
at::Tensor FollowFloatDtype(const at::Tensor& t, c10::ScalarType dtype) {
  if (!t.defined() || Followed(t.scalar_type(), dtype) == t.scalar_type()) return t;
  return t.to(Followed(t.scalar_type(), dtype));
}

void FollowFloatDtype(c10::IValue& v, c10::ScalarType dtype) {
  if (v.isTensor()) {
    at::Tensor t = FollowFloatDtype(v.toTensor(), dtype);
    if (!t.is_same(v.toTensor())) v = std::move(t);
  } else if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    if (std::none_of(el.begin(), el.end(), [&](const c10::IValue& x) {
          return x.isTensor() && x.toTensor().defined() && Followed(x.toTensor().scalar_type(), dtype) != x.toTensor().scalar_type();
        }))
      return;
    std::vector<c10::IValue> items(el.begin(), el.end());
    for (auto& x : items) FollowFloatDtype(x, dtype);
    v = c10::ivalue::Tuple::create(std::move(items));
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> l = v.toTensorList();
    for (size_t k = 0; k < l.size(); ++k) l.set(k, FollowFloatDtype(l.get(k), dtype));
  }
}

void RelayoutValue(c10::IValue& v, const Node& n) {
  if (v.isTensor()) {
    if (!n.meta.empty()) v = WithCapturedLayout(v.toTensor(), n.meta[0]);
  } else if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    std::vector<c10::IValue> items(el.begin(), el.end());
    bool changed = false;
    for (size_t k = 0; k < items.size() && k < n.meta.size(); ++k)
      if (items[k].isTensor()) {
        at::Tensor t = WithCapturedLayout(items[k].toTensor(), n.meta[k]);
        changed = changed || !t.is_same(items[k].toTensor());
        items[k] = std::move(t);
      }
    if (changed) v = c10::ivalue::Tuple::create(std::move(items));
  }
}

}  // namespace

// Whether two stride lists lay out `shape` alike (strides of size-1 dims do not matter).
static bool SameLayout(c10::IntArrayRef shape, c10::IntArrayRef a, const std::vector<int64_t>& b) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && a[d] != b[d]) return false;
  return true;
}

Expected<sym::Bindings> BindSymbols(const ir::Graph& g, const TensorMap& inputs) {
  sym::Bindings b;
  const std::string gw = "graph \"" + g.name() + "\"";
  for (const Node* n : g.placeholders()) {
    if (!n->sym.empty() || n->meta.empty() || !n->meta[0] || n->meta[0]->sym_shape.empty()) continue;
    auto it = inputs.find(n->name());
    if (it == inputs.end()) continue;  // Run names the missing input
    const ir::TensorMeta& m = *n->meta[0];
    if (static_cast<size_t>(it->second.dim()) != m.sym_shape.size())
      return Error::BadInput(gw + ": input \"" + n->name() + "\" has " + std::to_string(it->second.dim()) + " dims, its meta " +
                             std::to_string(m.sym_shape.size()));
    for (size_t d = 0; d < m.sym_shape.size(); ++d) {
      const std::string& name = m.sym_shape[d];
      if (name.empty() || !g.symbols.count(name)) continue;  // a static dim, or an expression: bound by its symbols
      const int64_t size = it->second.size(static_cast<int64_t>(d));
      auto [pos, fresh] = b.emplace(name, size);
      if (!fresh && pos->second != size)
        return Error::BadInput(gw + ": symbol " + name + " is " + std::to_string(pos->second) + " by one input and " +
                               std::to_string(size) + " by input \"" + n->name() + "\" dim " + std::to_string(d));
    }
  }
  for (const auto& [name, s] : g.symbols) {
    // Bound by no tensor input (a number the program passed): as recorded. An unbacked symbol's
    // value comes from the node that makes it as the graph runs (checked by the graph's asserts).
    b.emplace(name, s.hint);
    if (s.unbacked) continue;
    const int64_t v = b[name];
    if (v < s.min || (s.max && v > *s.max))
      return Error::BadInput(gw + ": symbol " + name + " = " + std::to_string(v) + " is outside its range [" + std::to_string(s.min) +
                             ", " + (s.max ? std::to_string(*s.max) : "inf") + "] (the range the graph was compiled for)");
  }
  for (const auto& guard : g.guards) {
    PARITY_ASSIGN_OR_RETURN(sym::Expr e, sym::Expr::Parse(guard, gw + ": guard"));
    const auto read = e.Symbols();
    if (std::any_of(read.begin(), read.end(), [&g](const std::string& s) { return g.symbols.at(s).unbacked; })) continue;
    PARITY_ASSIGN_OR_RETURN(double ok, e.Eval(b));
    if (ok == 0) {
      std::string values;
      for (const auto& name : e.Symbols()) values += (values.empty() ? "" : ", ") + name + " = " + std::to_string(b[name]);
      return Error::BadInput(gw + ": guard " + guard + " does not hold for " + values + " (the graph was compiled assuming it)");
    }
  }
  return b;
}

at::Tensor WithCapturedLayout(const at::Tensor& t, const std::optional<ir::TensorMeta>& meta) {
  if (!meta || !t.defined() || meta->stride.size() != static_cast<size_t>(t.dim()) || t.sizes() != c10::IntArrayRef(meta->shape) ||
      SameLayout(t.sizes(), t.strides(), meta->stride) || !DenseLayout(meta->shape, meta->stride))
    return t;
  return at::empty_strided(meta->shape, meta->stride, t.options()).copy_(t);
}

at::Tensor PrepareTensor(const at::Tensor& t, const RunOptions& options) {
  at::Tensor out = t;
  if (options.float_dtype && Followed(t.scalar_type(), *options.float_dtype) != t.scalar_type())
    out = out.to(Followed(t.scalar_type(), *options.float_dtype));
  if (out.device() != options.device) out = out.to(options.device);
  return out;
}

Expected<Program> Program::Compile(const ir::Graph& graph, const std::string& where) {
  PARITY_RETURN_IF_ERROR(graph.Lint());
  auto impl = std::make_unique<Impl>();
  impl->graph = &graph;
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
    FollowFloatDtype(frame[i], *options.float_dtype);
    RelayoutValue(frame[i], *s.node);
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

}  // namespace

void RegisterBatchKernel(const c10::OperatorName& op, std::shared_ptr<const BatchKernel> kernel) {
  std::lock_guard<std::mutex> lock(Batches().mu);
  Batches().kernels[op] = std::move(kernel);
}

std::shared_ptr<const BatchKernel> FindBatchKernel(const c10::OperatorName& op) {
  std::lock_guard<std::mutex> lock(Batches().mu);
  auto it = Batches().kernels.find(op);
  return it == Batches().kernels.end() ? nullptr : it->second;
}

Expected<RunResult> Program::Run(const TensorMap& inputs, const TensorMap& attrs, const RunOptions& options) const {
  std::optional<c10::InferenceMode> inference;
  if (!options.grad) inference.emplace();
  const auto& steps = impl_->steps;
  std::vector<c10::IValue> frame(steps.size());
  std::vector<char> computed(steps.size(), 0);  // op steps a batch kernel ran ahead
  PARITY_ASSIGN_OR_RETURN(std::vector<char> keep, KeptSteps(*impl_->graph, steps.size(), options));
  RunResult result;
  sym::Bindings symbols;
  if (impl_->graph->symbolic()) {
    PARITY_ASSIGN_OR_RETURN(symbols, BindSymbols(*impl_->graph, inputs));
  }

  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const Node& n = *s.node;
    try {
      switch (s.kind) {
        case StepKind::kSymInput: {
          PARITY_ASSIGN_OR_RETURN(double v, s.expr->Eval(symbols));
          frame[i] = n.sym_type == "float" ? c10::IValue(v) : n.sym_type == "bool" ? c10::IValue(v != 0) : c10::IValue(static_cast<int64_t>(v));
          break;
        }
        case StepKind::kSym: {
          std::vector<c10::IValue> vals;
          for (const auto& o : s.operands) vals.push_back(Materialize(o, frame, options));
          PARITY_ASSIGN_OR_RETURN(frame[i], EvalSym(n.target(), vals, "graph \"" + impl_->graph->name() + "\": node \"" + n.name() + "\""));
          break;
        }
        case StepKind::kInput: {
          auto it = inputs.find(n.name());
          if (it == inputs.end())
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
        case StepKind::kOutput: {
          for (const auto& o : s.operands) result.outputs.push_back(Materialized(frame[o.refs[0]]));
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
