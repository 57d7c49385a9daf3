// The graph IR: an ATen-level FX graph. The Graph owns its Nodes, kept in topological order;
// a Node is also the value it produces (as in FX): a tensor, or a tuple/list that `getitem`
// nodes index. `Lint()` states the invariants every pass and loader must keep.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"

namespace parity::ir {

class Node;

enum class NodeKind { kPlaceholder, kGetAttr, kCallFunction, kOutput };
const char* ToString(NodeKind kind);

// The target of FX's operator.getitem (indexes a tuple/list-valued node).
inline constexpr const char* kGetItem = "getitem";

// A higher-order op's target is "hop::<name>" (torch.ops.higher_order.<name>: cond, while_loop,
// flex_attention, invoke_subgraph, ...); its subgraph arguments name subgraphs of its graph.
inline constexpr const char* kHopNamespace = "hop::";
// How deep subgraphs may nest (a cond in a cond's branch is two); deeper is bad input.
inline constexpr int kMaxSubgraphDepth = 16;

// An argument of a call_function (or the output list): a tree of constants and node references.
// A higher-order op's arguments may also name a subgraph (kSubgraph: `s`) and hold a dict
// (kDict: `keys[k]` -> `list[k]`, flex_attention's kernel options).
struct Arg {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kNode, kList, kDtype, kDevice, kLayout, kMemoryFormat, kSubgraph, kDict };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;          // kString
  Node* node = nullptr;   // kNode
  std::vector<Arg> list;  // kList (FX lists and tuples alike); kDict's values
  std::vector<std::string> keys = {};  // kDict
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device{c10::kCPU};
  c10::Layout layout = c10::kStrided;
  c10::MemoryFormat memory_format = c10::MemoryFormat::Contiguous;

  static Arg None() { return {}; }
  static Arg Bool(bool v) {
    Arg a;
    a.kind = Kind::kBool;
    a.b = v;
    return a;
  }
  static Arg Int(int64_t v) {
    Arg a;
    a.kind = Kind::kInt;
    a.i = v;
    return a;
  }
  static Arg Float(double v) {
    Arg a;
    a.kind = Kind::kFloat;
    a.f = v;
    return a;
  }
  static Arg String(std::string v) {
    Arg a;
    a.kind = Kind::kString;
    a.s = std::move(v);
    return a;
  }
  static Arg Ref(Node* n) {
    Arg a;
    a.kind = Kind::kNode;
    a.node = n;
    return a;
  }
  static Arg List(std::vector<Arg> v) {
    Arg a;
    a.kind = Kind::kList;
    a.list = std::move(v);
    return a;
  }
  static Arg Subgraph(std::string name) {
    Arg a;
    a.kind = Kind::kSubgraph;
    a.s = std::move(name);
    return a;
  }
  static Arg Dict(std::vector<std::string> keys, std::vector<Arg> values) {
    Arg a;
    a.kind = Kind::kDict;
    a.keys = std::move(keys);
    a.list = std::move(values);
    return a;
  }
  static Arg Dtype(c10::ScalarType t) {
    Arg a;
    a.kind = Kind::kDtype;
    a.dtype = t;
    return a;
  }
  static Arg DeviceArg(c10::Device d) {
    Arg a;
    a.kind = Kind::kDevice;
    a.device = d;
    return a;
  }
  static Arg LayoutArg(c10::Layout l) {
    Arg a;
    a.kind = Kind::kLayout;
    a.layout = l;
    return a;
  }
  static Arg MemoryFormatArg(c10::MemoryFormat m) {
    Arg a;
    a.kind = Kind::kMemoryFormat;
    a.memory_format = m;
    return a;
  }

  // Calls f(Node*) for every node reference in the tree.
  template <typename F>
  void ForEachRef(F&& f) const {
    if (kind == Kind::kNode) f(node);
    for (const auto& a : list) a.ForEachRef(f);
  }
  template <typename F>
  void ForEachRefMut(F&& f) {
    if (kind == Kind::kNode) f(node);
    for (auto& a : list) a.ForEachRefMut(f);
  }
  // Calls f(name) for every subgraph the tree names.
  template <typename F>
  void ForEachSubgraph(F&& f) const {
    if (kind == Kind::kSubgraph) f(s);
    for (const auto& a : list) a.ForEachSubgraph(f);
  }
};

// Static metadata of one tensor value, as captured. In a symbolic graph `shape` and `stride`
// are the values of the recorded call (the symbols' hints) and `sym_shape` names, per dim, the
// size expression ("s77", "2*s77"; "" for a static dim).
struct TensorMeta {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  std::vector<std::string> sym_shape = {};  // empty, or one entry per dim
  int64_t numel() const;
  bool symbolic() const;
};

// A symbol of a symbolic graph (dynamo's ShapeEnv): its value in the recorded call and the range
// the compiled graph was valid for. An unbacked symbol (u0: `.item()`, the size of `nonzero`'s
// result) is no input's size: a node makes its value as the graph runs (the graph's own
// _assert_scalar nodes check its range), so no binding, sweep or shrink sets it; its hint is
// the value it took in the recorded call.
inline constexpr int64_t kUnboundedBelow = std::numeric_limits<int64_t>::min();  // "min": null

struct Symbol {
  int64_t hint = 0;
  int64_t min = 0;  // kUnboundedBelow: none
  std::optional<int64_t> max;  // none: unbounded
  bool unbacked = false;
  // An unbacked float (zuf0: `.item()` of a floating tensor): its recorded value; `hint` is
  // then unused, and expressions reading it are checked for their symbols only.
  std::optional<double> float_hint;
};

// The Python functions of size arithmetic on symbols (operator.mul, torch.sym_max, ...), as graph
// targets "sym::<name>": evaluated by the interpreter on integers, floats and booleans.
inline constexpr const char* kSymNamespace = "sym::";
bool IsSymTarget(const std::string& target);

// "ns::op.overload" -> ("ns::op", "overload"); "ns::op" and "ns::op.default" -> ("ns::op", "").
std::pair<std::string, std::string> SplitOperatorName(const std::string& target);

class Node {
 public:
  NodeKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  // placeholder: the input's name; get_attr: the tensor key in tensors.safetensors;
  // call_function: "namespace::op.overload" or "getitem"; output: "output".
  const std::string& target() const { return target_; }
  void set_target(std::string t) { target_ = std::move(t); }
  size_t index() const { return index_; }

  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  // One entry per produced value: a single tensor has one; a tuple-returning op one per element
  // (std::nullopt for non-tensor elements). Empty when unknown.
  std::vector<std::optional<TensorMeta>> meta;
  // A node whose value is a SymInt, SymFloat or SymBool (a size placeholder, sym_size, size
  // arithmetic): its expression in the symbols ("s77", "2*s77"); "" for tensor values.
  std::string sym;
  std::string sym_type = "int";  // with `sym`: int | float | bool
  std::string stack_trace;
  std::string module_path;
  // A while_loop's: how many iterations the program ran it (recorded at capture); the
  // interpreter stops one that runs far longer (interpreter/hops.cpp).
  std::optional<int64_t> iterations;

  // Every node this one reads, in argument order, with repeats.
  std::vector<Node*> Inputs() const;
  // "aten::add.Tensor" -> {"aten::add", "Tensor"}; "aten::relu" and "aten::relu.default" ->
  // {"aten::relu", ""} (the dispatcher spells the Python overload "default" as "").
  std::pair<std::string, std::string> OperatorName() const;  // SplitOperatorName(target())
  bool IsOp() const { return kind_ == NodeKind::kCallFunction && target_ != kGetItem; }
  // A higher-order op (target "hop::<name>").
  bool IsHigherOrder() const { return kind_ == NodeKind::kCallFunction && target_.rfind(kHopNamespace, 0) == 0; }
  // The subgraphs its arguments name, in argument order, with repeats.
  std::vector<std::string> SubgraphNames() const;
  // An op run for its effect, not a value (e.g. aten::_assert_tensor_metadata, which returns
  // nothing): dead-code elimination keeps it, as FX keeps impure nodes.
  bool HasSideEffects() const;

 private:
  friend class Graph;
  Node(NodeKind kind, std::string name, std::string target) : kind_(kind), name_(std::move(name)), target_(std::move(target)) {}
  NodeKind kind_;
  std::string name_;
  std::string target_;
  size_t index_ = 0;
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // Symbolic graphs (dynamic shapes): the symbols, and the guards (expressions over them) the
  // compile that made the graph assumed. Empty for a static graph.
  std::map<std::string, Symbol> symbols;
  std::vector<std::string> guards;
  bool symbolic() const { return !symbols.empty(); }

  // The graphs its higher-order op nodes take as arguments (a cond's branches, a
  // flex_attention's score and mask functions, an invoke_subgraph's body), by name. Each is a
  // graph like any other (its placeholders are its operands, its output its results) and may
  // hold subgraphs of its own; a node names only subgraphs of the graph holding it. Subgraphs
  // read the symbols of the graph at the top (they declare none).
  std::map<std::string, std::unique_ptr<Graph>> subgraphs;
  const Graph* Subgraph(const std::string& name) const;
  // How deep subgraphs nest below this graph (0: none).
  int SubgraphDepth() const;

  // Appends a node. Names must be unique (Lint checks); returns the new node.
  Node* Append(NodeKind kind, std::string name, std::string target);
  // Inserts a placeholder before the first non-placeholder node.
  Node* InsertPlaceholder(std::string name);
  // Inserts a node right before `pos` (a node of this graph); returns it.
  Node* InsertBefore(const Node* pos, NodeKind kind, std::string name, std::string target);

  size_t size() const { return nodes_.size(); }
  Node* at(size_t i) const { return nodes_[i].get(); }
  Node* Find(const std::string& name) const;
  Node* output() const;  // the output node, or nullptr
  std::vector<Node*> nodes() const;
  std::vector<Node*> placeholders() const;
  std::vector<Node*> ops() const;  // call_function nodes that are ATen ops (not getitem)
  // The values the output node returns, flattened (None entries skipped).
  std::vector<Node*> OutputValues() const;
  // A name not used by any node, starting with `base`.
  std::string FreshName(const std::string& base) const;

  // Invariants: names unique and non-empty; every reference points to a node of this graph
  // that comes earlier; placeholders first; exactly one output node, last; call_function nodes
  // have a target; getitem has (node, int); every subgraph a node names is one of this graph's,
  // and each subgraph holds the same invariants.
  [[nodiscard]] Status Lint() const;

  [[nodiscard]] Graph Clone() const;

  // Removes call_function/get_attr nodes no output or side-effecting op depends on, then the
  // subgraphs and symbols nothing reads any more (PruneSubgraphs, PruneSymbols).
  // Placeholders stay (their removal changes the signature: a separate, explicit step).
  void EliminateDeadCode();
  // Removes placeholders no node reads, then the symbols nothing reads any more; returns their names.
  std::vector<std::string> RemoveUnusedPlaceholders();

  // The prefix of the graph up to and including node `last`, returning `outputs` (names of
  // nodes at or before `last`), dead code removed.
  [[nodiscard]] Expected<Graph> Prefix(size_t last, const std::vector<std::string>& outputs) const;
  // The subgraph made of the nodes named in `keep`, returning `outputs`; any value read from a
  // node outside `keep` becomes a placeholder of the same name.
  [[nodiscard]] Expected<Graph> Extract(const std::set<std::string>& keep, const std::vector<std::string>& outputs) const;
  // Replaces the output list by references to `outputs`.
  [[nodiscard]] Status SetOutputs(const std::vector<std::string>& outputs);
  // Replaces every use of `from` by `to`.
  void ReplaceAllUses(Node* from, Node* to);
  // Removes the nodes named in `names`; the caller guarantees no remaining node reads them.
  void Erase(const std::set<const Node*>& names);
  // Drops the subgraphs no node names.
  void PruneSubgraphs();
  // Drops the symbols nothing reads: no value's size expression (a node's `sym`, a tensor's
  // `sym_shape`, here or in a subgraph) and no guard over a symbol that is read (a guard reading
  // one read symbol keeps all of its own); drops the guards over dropped symbols only. A slice
  // of a symbolic graph (a minifier's candidate) then declares the symbols of what it kept, not
  // every symbol of the graph it was cut from. An expression that does not parse keeps every
  // symbol (the reader reports it where it is read).
  void PruneSymbols();

 private:
  void Reindex();
  std::string name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, Node*> by_name_;
};

// The model's line in a node's stack trace: the innermost frame outside torch's own files and
// generated code, as "model.py:40 x = self.proj(x)"; "" when there is none.
std::string ModelLine(const std::string& stack_trace);

}  // namespace parity::ir
