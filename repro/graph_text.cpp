#include "repro/graph_text.h"

#include <sstream>

#include "repro/dtypes.h"
#include "repro/graph_json.h"

namespace parity::ir {

std::string ArgToText(const Arg& a) {
  std::ostringstream os;
  switch (a.kind) {
    case Arg::Kind::kNone: return "None";
    case Arg::Kind::kBool: return a.b ? "True" : "False";
    case Arg::Kind::kInt: return std::to_string(a.i);
    case Arg::Kind::kFloat: {
      if (std::isnan(a.f)) return "nan";
      if (std::isinf(a.f)) return a.f > 0 ? "inf" : "-inf";
      os.precision(17);
      os << a.f;
      std::string s = os.str();
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      return s;
    }
    case Arg::Kind::kString: return "\"" + a.s + "\"";
    case Arg::Kind::kNode: return "%" + a.node->name();
    case Arg::Kind::kList: {
      os << "[";
      for (size_t k = 0; k < a.list.size(); ++k) os << (k ? ", " : "") << ArgToText(a.list[k]);
      os << "]";
      return os.str();
    }
    case Arg::Kind::kDtype: return TorchDtypeName(a.dtype);
    case Arg::Kind::kDevice: return a.device.str();
    case Arg::Kind::kLayout: return a.layout == c10::kStrided ? "strided" : "sparse_coo";
    case Arg::Kind::kMemoryFormat: return ArgToJson(a).begin().value().get<std::string>();
    case Arg::Kind::kSubgraph: return "@" + a.s;
    case Arg::Kind::kDict: {
      os << "{";
      for (size_t k = 0; k < a.keys.size(); ++k) os << (k ? ", " : "") << a.keys[k] << ": " << ArgToText(a.list[k]);
      os << "}";
      return os.str();
    }
  }
  return "?";
}

namespace {
std::string MetaText(const std::vector<std::optional<TensorMeta>>& meta) {
  if (meta.empty()) return "";
  std::ostringstream os;
  auto one = [&](const std::optional<TensorMeta>& m) {
    if (!m) {
      os << "_";
      return;
    }
    os << ShortDtypeName(m->dtype) << "[";
    for (size_t k = 0; k < m->shape.size(); ++k)
      os << (k ? ", " : "") << (k < m->sym_shape.size() && !m->sym_shape[k].empty() ? m->sym_shape[k] : std::to_string(m->shape[k]));
    os << "]";
  };
  if (meta.size() == 1) {
    one(meta[0]);
  } else {
    os << "(";
    for (size_t k = 0; k < meta.size(); ++k) {
      if (k) os << ", ";
      one(meta[k]);
    }
    os << ")";
  }
  return " : " + os.str();
}
}  // namespace

namespace {
void NodesText(std::ostringstream& os, const Graph& g, bool with_stack_traces, const std::string& indent);
}  // namespace

std::string GraphToText(const Graph& g, bool with_stack_traces) {
  std::ostringstream os;
  os << "graph " << g.name() << " {\n";
  for (const auto& [name, s] : g.symbols) {
    if (s.float_hint) {
      os << "  symbol " << name << " = " << *s.float_hint << "  # data-dependent float\n";
      continue;
    }
    os << "  symbol " << name << " = " << s.hint << "  # " << (s.unbacked ? "data-dependent, " : "") << "in ["
       << (s.min == ir::kUnboundedBelow ? "-inf" : std::to_string(s.min)) << ", " << (s.max ? std::to_string(*s.max) : "inf") << "]\n";
  }
  for (const auto& guard : g.guards) os << "  guard " << guard << "\n";
  NodesText(os, g, with_stack_traces, "  ");
  os << "}\n";
  return os.str();
}

namespace {
void NodesText(std::ostringstream& os, const Graph& g, bool with_stack_traces, const std::string& indent) {
  for (const auto& [name, sg] : g.subgraphs) {
    os << indent << "subgraph @" << name << " {\n";
    NodesText(os, *sg, with_stack_traces, indent + "  ");
    os << indent << "}\n";
  }
  for (const Node* n : g.nodes()) {
    os << indent;
    const std::string meta = n->sym.empty() ? MetaText(n->meta) : " : Sym(" + n->sym + ")";
    switch (n->kind()) {
      case NodeKind::kPlaceholder:
        os << "%" << n->name() << meta << " = placeholder";
        if (n->target() != n->name()) os << "[" << n->target() << "]";
        break;
      case NodeKind::kGetAttr: os << "%" << n->name() << meta << " = get_attr[" << n->target() << "]"; break;
      case NodeKind::kCallFunction: {
        os << "%" << n->name() << meta << " = " << n->target() << "(";
        bool first = true;
        for (const auto& a : n->args) {
          os << (first ? "" : ", ") << ArgToText(a);
          first = false;
        }
        for (const auto& [k, a] : n->kwargs) {
          os << (first ? "" : ", ") << k << "=" << ArgToText(a);
          first = false;
        }
        os << ")";
        break;
      }
      case NodeKind::kOutput: {
        os << "return ";
        os << (n->args.empty() ? "()" : ArgToText(n->args[0]));
        break;
      }
    }
    if (!n->module_path.empty() && n->kind() == NodeKind::kCallFunction) os << "  # " << n->module_path;
    os << "\n";
    if (with_stack_traces && !n->stack_trace.empty()) {
      std::istringstream st(n->stack_trace);
      for (std::string line; std::getline(st, line);) os << indent << "  # " << line << "\n";
    }
  }
}
}  // namespace

}  // namespace parity::ir
