#include "interpreter/operands.h"

#include <ATen/core/jit_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>

#include "interpreter/layout.h"

namespace parity::interp::detail {

using ir::Arg;

at::Tensor WrappedNumber(const c10::IValue& v) {
  at::Tensor t = v.isInt()      ? at::scalar_tensor(v.toInt(), at::kLong)
                 : v.isDouble() ? at::scalar_tensor(v.toDouble(), at::kDouble)
                                : at::scalar_tensor(v.toBool(), at::kBool);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

namespace {

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
    case Arg::Kind::kSubgraph: return "subgraph @" + a.s;
    case Arg::Kind::kDict: return "a dict";
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
        // None in a Tensor position: an undefined tensor, as torch's Python binding passes it
        // (AOTAutograd's backward calls _scaled_dot_product_efficient_attention_backward with
        // attn_bias None; the kernel reads an undefined bias as none).
        if (a.kind == Arg::Kind::kNone) return Const(c10::IValue(at::Tensor()));
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
      case K::AnyType:  // a collective's group_name (a name or a group object; the graph records the name)
        if (a.kind == Arg::Kind::kString) return Const(a.s);
        if (a.kind == Arg::Kind::kInt) return Const(a.i);
        if (a.kind == Arg::Kind::kFloat) return Const(a.f);
        if (a.kind == Arg::Kind::kBool) return Const(a.b);
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

}  // namespace

Expected<Operand> BuildOperand(const std::string& where, const c10::Argument& schema_arg, const Arg& a) {
  return OperandBuilder(where).Build(schema_arg, a);
}

namespace {

// A device without an index ("cuda") as its current one, where tensors made on it land: a
// graph's own device checks (export's _assert_tensor_metadata) compare with the index.
c10::Device Indexed(const c10::Device& d) {
  if (d.has_index() || d.is_cpu() || !c10::impl::hasDeviceGuardImpl(d.type())) return d;
  const c10::Device current = c10::impl::getDeviceGuardImpl(d.type())->getDevice();
  return current.has_index() ? current : d;
}

}  // namespace

c10::IValue Materialize(const Operand& o, const std::vector<c10::IValue>& frame, const RunOptions& options) {
  switch (o.kind) {
    case Operand::Kind::kConst: return o.constant;
    case Operand::Kind::kDtype: {
      auto t = static_cast<c10::ScalarType>(o.constant.toInt());
      if (options.float_dtype) t = Followed(t, *options.float_dtype);
      return t;
    }
    case Operand::Kind::kDevice: return Indexed(options.device);
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

}  // namespace parity::interp::detail
