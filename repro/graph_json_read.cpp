#include "repro/graph_json.h"

#include <cmath>
#include <limits>

#include "repro/dtypes.h"
#include "repro/hop_check.h"
#include "repro/sym_expr.h"

// Reading the JSON form: every field checked, bad input named by file and field.
namespace parity::ir {
using nlohmann::json;

namespace {

constexpr int kMaxArgDepth = 32;

struct Parser {
  const std::string& where;
  Graph& g;
  sym::Bindings hints = {};  // each symbol's recorded value
  // A subgraph's parser: the graph at the top (whose symbols it reads), the path to the subgraph
  // for messages ("subgraphs.true_graph_0.") and how deep it is.
  const Graph* top = nullptr;
  std::string prefix = {};
  int depth = 0;

  const std::map<std::string, Symbol>& Declared() const { return top ? top->symbols : g.symbols; }

  Error Bad(const std::string& field, const std::string& what) const {
    return Error::BadInput(where + ": " + prefix + field + ": " + what);
  }

  // An argument: a number, string, None, tagged value or list; lists nest at most kMaxArgDepth
  // deep (an FX argument is a list of lists at most; a deeper one is bad input, not a recursion
  // as deep as the file).
  Expected<Arg> ParseArg(const json& j, const std::string& field, int depth = 0) {
    switch (j.type()) {
      case json::value_t::null: return Arg::None();
      case json::value_t::boolean: return Arg::Bool(j.get<bool>());
      case json::value_t::number_integer:
      case json::value_t::number_unsigned: {
        if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return Bad(field, "integer out of int64 range");
        return Arg::Int(j.get<int64_t>());
      }
      case json::value_t::number_float: return Arg::Float(j.get<double>());
      case json::value_t::string: return Arg::String(j.get<std::string>());
      case json::value_t::array: {
        if (depth >= kMaxArgDepth) return Bad(field, "lists nested deeper than " + std::to_string(kMaxArgDepth) + " levels");
        std::vector<Arg> items;
        for (size_t k = 0; k < j.size(); ++k) {
          auto a = ParseArg(j[k], field + "[" + std::to_string(k) + "]", depth + 1);
          if (!a.ok()) return a.error();
          items.push_back(std::move(*a));
        }
        return Arg::List(std::move(items));
      }
      case json::value_t::object: return ParseTagged(j, field);
      default: return Bad(field, "unsupported JSON value");
    }
  }

  Expected<Arg> ParseTagged(const json& j, const std::string& field) {
    if (j.size() != 1) return Bad(field, "a tagged value must have exactly one key");
    const auto only = j.begin();  // named: g++ 13 takes a reference through a temporary iterator for a dangling one
    const std::string& tag = only.key();
    const json& v = only.value();
    const std::string f = field + "." + tag;
    if (tag == "node") {
      if (!v.is_string()) return Bad(f, "expected a node name");
      Node* n = g.Find(v.get<std::string>());
      if (!n) return Bad(f, "unknown node \"" + v.get<std::string>() + "\" (not defined earlier)");
      return Arg::Ref(n);
    }
    if (tag == "subgraph") {
      if (!v.is_string()) return Bad(f, "expected a subgraph name");
      return Arg::Subgraph(v.get<std::string>());  // resolved by Lint (the subgraphs are parsed first)
    }
    if (tag == "dict") {
      if (!v.is_object()) return Bad(f, "expected an object");
      std::vector<std::string> keys;
      std::vector<Arg> values;
      for (auto it = v.begin(); it != v.end(); ++it) {
        PARITY_ASSIGN_OR_RETURN(Arg a, ParseArg(it.value(), f + "." + it.key(), kMaxArgDepth - 1));
        keys.push_back(it.key());
        values.push_back(std::move(a));
      }
      return Arg::Dict(std::move(keys), std::move(values));
    }
    if (tag == "float") {
      if (v.is_number()) return Arg::Float(v.get<double>());
      if (!v.is_string()) return Bad(f, "expected a number or \"inf\", \"-inf\", \"nan\"");
      const auto s = v.get<std::string>();
      if (s == "inf") return Arg::Float(std::numeric_limits<double>::infinity());
      if (s == "-inf") return Arg::Float(-std::numeric_limits<double>::infinity());
      if (s == "nan") return Arg::Float(std::numeric_limits<double>::quiet_NaN());
      return Bad(f, "expected \"inf\", \"-inf\" or \"nan\", got \"" + s + "\"");
    }
    if (tag == "dtype") {
      if (!v.is_string()) return Bad(f, "expected a dtype name");
      auto t = ParseTorchDtype(v.get<std::string>());
      if (!t.ok()) return Bad(f, t.error().message);
      return Arg::Dtype(*t);
    }
    if (tag == "device") {
      if (!v.is_string()) return Bad(f, "expected a device string");
      try {
        return Arg::DeviceArg(c10::Device(v.get<std::string>()));
      } catch (const std::exception&) {
        return Bad(f, "invalid device \"" + v.get<std::string>() + "\"");
      }
    }
    if (tag == "layout") {
      if (v == "strided") return Arg::LayoutArg(c10::kStrided);
      if (v == "sparse_coo") return Arg::LayoutArg(c10::kSparse);
      return Bad(f, "unsupported layout " + v.dump());
    }
    if (tag == "memory_format") {
      if (v == "contiguous_format") return Arg::MemoryFormatArg(c10::MemoryFormat::Contiguous);
      if (v == "preserve_format") return Arg::MemoryFormatArg(c10::MemoryFormat::Preserve);
      if (v == "channels_last") return Arg::MemoryFormatArg(c10::MemoryFormat::ChannelsLast);
      if (v == "channels_last_3d") return Arg::MemoryFormatArg(c10::MemoryFormat::ChannelsLast3d);
      return Bad(f, "unsupported memory_format " + v.dump());
    }
    return Bad(field, "unknown tag \"" + tag + "\"");
  }

  Expected<std::optional<TensorMeta>> ParseMeta(const json& j, const std::string& field) {
    if (j.is_null()) return std::optional<TensorMeta>();
    if (!j.is_object()) return Bad(field, "expected an object or null");
    TensorMeta m;
    if (!j.contains("dtype") || !j["dtype"].is_string()) return Bad(field + ".dtype", "missing or not a string");
    auto t = ParseTorchDtype(j["dtype"].get<std::string>());
    if (!t.ok()) return Bad(field + ".dtype", t.error().message);
    m.dtype = *t;
    for (const char* key : {"shape", "stride"}) {
      if (!j.contains(key)) {
        if (std::string(key) == "stride") continue;
        return Bad(field + "." + key, "missing");
      }
      if (!j[key].is_array()) return Bad(field + "." + key, "not an array");
      auto& dst = std::string(key) == "shape" ? m.shape : m.stride;
      for (const auto& d : j[key]) {
        if (!d.is_number_integer()) return Bad(field + "." + key, "holds a non-integer");
        dst.push_back(d.get<int64_t>());
      }
    }
    if (j.contains("sym_shape")) {
      const std::string f = field + ".sym_shape";
      if (!j["sym_shape"].is_array() || j["sym_shape"].size() != m.shape.size())
        return Bad(f, "not an array of one entry per dim");
      for (const auto& d : j["sym_shape"]) {
        if (d.is_null()) {
          m.sym_shape.emplace_back();
          continue;
        }
        if (!d.is_string()) return Bad(f, "holds neither an expression nor null");
        PARITY_RETURN_IF_ERROR(CheckExpr(d.get<std::string>(), f, ExprUse::kSize));
        m.sym_shape.push_back(d.get<std::string>());
      }
    }
    return std::optional<TensorMeta>(std::move(m));
  }

  // A size expression that parses, reads only declared symbols and has a value at the symbols'
  // hints (the recorded call): a file whose sizes divide by zero, overflow or cannot hold is bad
  // input here, in every command, never a run that fails later.
  enum class ExprUse { kSize, kInt, kNumber, kGuard };  // a dim, an integer, any number, a condition
  Status CheckExpr(const std::string& text, const std::string& field, ExprUse use = ExprUse::kNumber) const {
    PARITY_ASSIGN_OR_RETURN(sym::Expr e, sym::Expr::Parse(text, where + ": " + field));
    for (const auto& name : e.Symbols()) {
      if (!Declared().count(name)) return Bad(field, "symbol \"" + name + "\" is not declared in \"symbols\"");
      if (Declared().at(name).float_hint) return Status::Ok();  // a data-dependent float: no integer value to check at
    }
    auto at_hints = [&](const Error& err) { return Bad(field, "at the recorded sizes: " + err.message); };
    if (use == ExprUse::kSize || use == ExprUse::kInt) {
      auto v = e.EvalInt(hints);
      if (!v.ok()) return at_hints(v.error());
      if (use == ExprUse::kSize && *v < 0) return Bad(field, sym::Quoted(text) + " is " + std::to_string(*v) + " at the recorded sizes, not a size");
      return Status::Ok();
    }
    auto v = e.Eval(hints);
    if (!v.ok()) return at_hints(v.error());
    if (!std::isfinite(*v)) return Bad(field, sym::Quoted(text) + " is not finite at the recorded sizes");
    if (use == ExprUse::kGuard && *v == 0)
      return Bad(field, "guard " + sym::Quoted(text) + " does not hold at the recorded sizes (" + HintsText(e) + ")");
    return Status::Ok();
  }

  std::string HintsText(const sym::Expr& e) const {
    std::string out;
    for (const auto& name : e.Symbols()) out += (out.empty() ? "" : ", ") + name + " = " + std::to_string(hints.at(name));
    return out;
  }

  Status ParseSymbols(const json& j) {
    if (j.contains("symbols")) {
      if (!j["symbols"].is_object()) return Bad("symbols", "not an object");
      for (auto it = j["symbols"].begin(); it != j["symbols"].end(); ++it) {
        const std::string f = "symbols." + it.key();
        const json& s = it.value();
        if (!s.is_object() || !s.contains("hint") || !s["hint"].is_number())
          return Bad(f, "expected {\"hint\": int, \"min\": int, \"max\": int or null}");
        Symbol sym;
        if (s.contains("unbacked")) {
          if (!s["unbacked"].is_boolean()) return Bad(f + ".unbacked", "not a boolean");
          sym.unbacked = s["unbacked"].get<bool>();
        }
        if (!s["hint"].is_number_integer()) {  // only a data-dependent float may have a float value
          if (!sym.unbacked || !std::isfinite(s["hint"].get<double>())) return Bad(f + ".hint", "not an integer");
          sym.float_hint = s["hint"].get<double>();
          g.symbols[it.key()] = sym;
          continue;
        }
        sym.hint = s["hint"].get<int64_t>();
        if (s.contains("min") && !s["min"].is_null()) {
          if (!s["min"].is_number_integer()) return Bad(f + ".min", "neither an integer nor null");
          sym.min = s["min"].get<int64_t>();
        } else if (s.contains("min")) {
          sym.min = ir::kUnboundedBelow;  // null: a data-dependent value may be negative
        }
        if (s.contains("max") && !s["max"].is_null()) {
          if (!s["max"].is_number_integer()) return Bad(f + ".max", "neither an integer nor null");
          sym.max = s["max"].get<int64_t>();
        }
        if (sym.max && *sym.max < sym.min)
          return Bad(f, "range [" + std::to_string(sym.min) + ", " + std::to_string(*sym.max) + "] is empty (min > max)");
        if (sym.hint < sym.min || (sym.max && sym.hint > *sym.max))
          return Bad(f + ".hint", std::to_string(sym.hint) + " is outside the symbol's range [" + std::to_string(sym.min) + ", " +
                                      (sym.max ? std::to_string(*sym.max) : "inf") + "]");
        g.symbols[it.key()] = sym;
        hints[it.key()] = sym.hint;
      }
    }
    if (j.contains("guards")) {
      if (!j["guards"].is_array()) return Bad("guards", "not an array");
      for (size_t k = 0; k < j["guards"].size(); ++k) {
        const json& e = j["guards"][k];
        if (!e.is_string()) return Bad("guards[" + std::to_string(k) + "]", "not a string");
        PARITY_RETURN_IF_ERROR(CheckExpr(e.get<std::string>(), "guards[" + std::to_string(k) + "]", ExprUse::kGuard));
        g.guards.push_back(e.get<std::string>());
      }
    }
    return Status::Ok();
  }
};

Expected<NodeKind> ParseKind(const std::string& s) {
  if (s == "placeholder") return NodeKind::kPlaceholder;
  if (s == "get_attr") return NodeKind::kGetAttr;
  if (s == "call_function") return NodeKind::kCallFunction;
  if (s == "output") return NodeKind::kOutput;
  return Error::BadInput("unknown op kind \"" + s + "\" (expected placeholder, get_attr, call_function or output)");
}


Status CheckHeader(const json& j, const std::string& where) {
  if (!j.is_object()) return Error::BadInput(where + ": top level is not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Error::BadInput(where + ": field \"version\" is missing or not an integer");
  if (j["version"].get<int>() < kOldestGraphFormatVersion || j["version"].get<int>() > kGraphFormatVersion)
    return Error::BadInput(where + ": field \"version\" is " + j["version"].dump() + ", this parity reads versions " +
                           std::to_string(kOldestGraphFormatVersion) + " to " + std::to_string(kGraphFormatVersion));
  if (!j.contains("nodes") || !j["nodes"].is_array())
    return Error::BadInput(where + ": field \"nodes\" is missing or not an array");
  if (j.contains("name") && !j["name"].is_string()) return Error::BadInput(where + ": field \"name\" is not a string");
  return Status::Ok();
}

// A node's args and kwargs, parsed before the node is added (so a self-reference is an unknown node).
Status ParseNodeArgs(Parser& p, const json& jn, const std::string& field, std::vector<Arg>& args,
                     std::vector<std::pair<std::string, Arg>>& kwargs) {
  if (jn.contains("args")) {
    if (!jn["args"].is_array()) return p.Bad(field + ".args", "not an array");
    for (size_t a = 0; a < jn["args"].size(); ++a) {
      PARITY_ASSIGN_OR_RETURN(Arg arg, p.ParseArg(jn["args"][a], field + ".args[" + std::to_string(a) + "]"));
      args.push_back(std::move(arg));
    }
  }
  if (jn.contains("kwargs")) {
    if (!jn["kwargs"].is_object()) return p.Bad(field + ".kwargs", "not an object");
    for (auto it = jn["kwargs"].begin(); it != jn["kwargs"].end(); ++it) {
      PARITY_ASSIGN_OR_RETURN(Arg arg, p.ParseArg(it.value(), field + ".kwargs." + it.key()));
      kwargs.emplace_back(it.key(), std::move(arg));
    }
  }
  return Status::Ok();
}

// meta: tensor metadata (val), a size node's expression (sym, sym_type), where it came from.
Status ParseNodeMeta(Parser& p, const json& m, const std::string& field, Node& n) {
  if (!m.is_object()) return p.Bad(field + ".meta", "not an object");
  if (m.contains("val")) {
    if (!m["val"].is_array()) return p.Bad(field + ".meta.val", "not an array");
    for (size_t v = 0; v < m["val"].size(); ++v) {
      PARITY_ASSIGN_OR_RETURN(auto meta, p.ParseMeta(m["val"][v], field + ".meta.val[" + std::to_string(v) + "]"));
      n.meta.push_back(std::move(meta));
    }
  }
  if (m.contains("sym")) {
    if (!m["sym"].is_string()) return p.Bad(field + ".meta.sym", "not a string");
    if (m.contains("sym_type")) {
      if (m["sym_type"] != "int" && m["sym_type"] != "float" && m["sym_type"] != "bool")
        return p.Bad(field + ".meta.sym_type", "expected \"int\", \"float\" or \"bool\"");
      n.sym_type = m["sym_type"].get<std::string>();
    }
    PARITY_RETURN_IF_ERROR(p.CheckExpr(m["sym"].get<std::string>(), field + ".meta.sym",
                                       n.sym_type == "int" ? Parser::ExprUse::kInt : Parser::ExprUse::kNumber));
    n.sym = m["sym"].get<std::string>();
  }
  if (m.contains("stack_trace") && m["stack_trace"].is_string()) n.stack_trace = m["stack_trace"].get<std::string>();
  if (m.contains("module_path") && m["module_path"].is_string()) n.module_path = m["module_path"].get<std::string>();
  if (m.contains("iterations")) {
    // Any JSON integer that is not negative (a file's 4 parses as unsigned, GraphToJson's as signed).
    const json& it = m["iterations"];
    if (!it.is_number_integer() || (it.is_number_unsigned() ? it.get<uint64_t>() > INT64_MAX : it.get<int64_t>() < 0))
      return p.Bad(field + ".meta.iterations", "not a non-negative integer");
    n.iterations = m["iterations"].get<int64_t>();
  }
  return Status::Ok();
}

// nodes[k]: its name, op and target, arguments and metadata, appended to p.g.
Status ParseNode(Parser& p, const json& jn, size_t k) {
  std::string field = "nodes[" + std::to_string(k) + "]";
  if (!jn.is_object()) return p.Bad(field, "not an object");
  if (!jn.contains("name") || !jn["name"].is_string() || jn["name"].get<std::string>().empty())
    return p.Bad(field + ".name", "missing, empty or not a string");
  const std::string name = jn["name"].get<std::string>();
  field += " (\"" + name + "\")";
  if (p.g.Find(name)) return p.Bad(field + ".name", "duplicate node name");
  if (!jn.contains("op") || !jn["op"].is_string()) return p.Bad(field + ".op", "missing or not a string");
  auto kind = ParseKind(jn["op"].get<std::string>());
  if (!kind.ok()) return p.Bad(field + ".op", kind.error().message);
  if (jn.contains("target") && !jn["target"].is_string()) return p.Bad(field + ".target", "not a string");
  std::string target = jn.contains("target") ? jn["target"].get<std::string>() : std::string();
  if (*kind == NodeKind::kPlaceholder && target.empty()) target = name;
  if ((*kind == NodeKind::kCallFunction || *kind == NodeKind::kGetAttr) && target.empty())
    return p.Bad(field + ".target", "missing or empty");
  if (*kind == NodeKind::kOutput) target = "output";
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  PARITY_RETURN_IF_ERROR(ParseNodeArgs(p, jn, field, args, kwargs));
  Node* n = p.g.Append(*kind, name, target);
  n->args = std::move(args);
  n->kwargs = std::move(kwargs);
  if (jn.contains("meta")) PARITY_RETURN_IF_ERROR(ParseNodeMeta(p, jn["meta"], field, *n));
  return Status::Ok();
}

// "subgraphs": {name: {"nodes": [...], "subgraphs": {...}}}, each parsed as a graph reading the
// top graph's symbols, at most kMaxSubgraphDepth deep (never a recursion as deep as the file).
Status ParseSubgraphs(Parser& p, const json& j) {
  if (!j.contains("subgraphs")) return Status::Ok();
  if (!j["subgraphs"].is_object()) return p.Bad("subgraphs", "not an object");
  if (p.depth >= kMaxSubgraphDepth)
    return p.Bad("subgraphs", "subgraphs nested deeper than " + std::to_string(kMaxSubgraphDepth) + " levels");
  for (auto it = j["subgraphs"].begin(); it != j["subgraphs"].end(); ++it) {
    const std::string field = "subgraphs." + it.key();
    const json& sj = it.value();
    if (!sj.is_object() || !sj.contains("nodes") || !sj["nodes"].is_array())
      return p.Bad(field, "expected an object with an array \"nodes\"");
    if (sj.contains("symbols") || sj.contains("guards")) return p.Bad(field, "a subgraph declares no symbols or guards");
    auto sg = std::make_unique<Graph>(it.key());
    Parser sp{p.where, *sg, p.hints, p.top ? p.top : &p.g, p.prefix + field + ".", p.depth + 1};
    PARITY_RETURN_IF_ERROR(ParseSubgraphs(sp, sj));
    for (size_t k = 0; k < sj["nodes"].size(); ++k) PARITY_RETURN_IF_ERROR(ParseNode(sp, sj["nodes"][k], k));
    p.g.subgraphs[it.key()] = std::move(sg);
  }
  return Status::Ok();
}

}  // namespace

Expected<Graph> GraphFromJson(const json& j, const std::string& where) {
  PARITY_RETURN_IF_ERROR(CheckHeader(j, where));
  Graph g(j.contains("name") ? j["name"].get<std::string>() : std::string("graph"));
  Parser p{where, g};
  PARITY_RETURN_IF_ERROR(p.ParseSymbols(j));
  if (j.contains("subgraphs") && j["version"].get<int>() < 3)
    return Error::BadInput(where + ": field \"subgraphs\" needs format version 3 (the file says " + j["version"].dump() + ")");
  PARITY_RETURN_IF_ERROR(ParseSubgraphs(p, j));
  for (size_t k = 0; k < j["nodes"].size(); ++k) PARITY_RETURN_IF_ERROR(ParseNode(p, j["nodes"][k], k));
  auto st = g.Lint();
  if (!st.ok()) return Error::BadInput(where + ": " + st.error().message);
  if (Status hops = CheckHigherOrderCalls(g); !hops.ok()) return Error::BadInput(where + ": " + hops.error().message);
  return g;
}

}  // namespace parity::ir
