// The eager reference: runs a graph's ATen ops through the c10 dispatcher, by schema. The room's
// files: interpreter.h the API; program.cpp the compile and the run loop; operands.{h,cpp}
// operand conversion by schema; sym_ops.{h,cpp} symbolic sizes; layout.{h,cpp} layouts and the
// fp64 run's dtype rule; hops.{h,cpp} and flex_attention.cpp the higher-order ops; batch.{h,cpp}
// batch kernels.
//
// Program::Compile resolves every call_function node to an operator handle once and converts
// its constant arguments to IValues by the schema's argument types (defaults and kwargs filled
// from the schema), so a run only gathers node values and calls the kernel. Per-run state lives
// in a frame local to Run, so one Program can run concurrently. Values are released after their
// last use unless recorded; recording keeps references, never copies.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "interpreter/collectives.h"
#include "repro/graph.h"
#include "repro/sym_expr.h"
#include "util/status.h"

namespace parity::interp {

using TensorMap = std::map<std::string, at::Tensor>;

// Called after each op node with its value, in subgraphs too (each time a higher-order op runs
// one); may replace the value (fault injection) or return an error (which aborts the run).
using NodeHook = std::function<Status(const ir::Node& node, c10::IValue& value)>;

struct RunOptions {
  c10::Device device{c10::kCPU};
  // When set, floating inputs, parameters and floating dtype arguments become this dtype
  // (kDouble gives the fp64 reference); integer and bool data is untouched. Such a run also
  // copies op results whose layout differs from the one recorded at capture (meta strides)
  // into it: kernels choose layouts by dtype (cuDNN, SDPA, mkldnn vs their float64 paths), and
  // a later view may be legal only on the captured layout. Inputs and parameters always get
  // their captured layout (tensors.safetensors stores them contiguous).
  std::optional<c10::ScalarType> float_dtype;
  // Run with autograd (train mode). When false the run is under c10::InferenceMode.
  bool grad = false;
  bool record_all = false;
  std::vector<std::string> record;  // names of nodes whose values to keep
  NodeHook hook;
  // The most iterations a while_loop may run; 0: WhileLimit's rule (from what the program ran).
  int64_t while_limit = 0;
  // Who computes the graph's collectives for this run (one rank's view; collectives.h). Unset:
  // a collective node is an error naming it.
  std::shared_ptr<Collectives> collectives;
};

// A while_loop stops with an error naming its node after this many iterations: kWhileFactor x
// the iterations the program ran it (recorded at capture), at least kWhileFloor, at most
// kWhileCeiling (kWhileCeiling where nothing was recorded); `override_limit` > 0 instead.
inline constexpr int64_t kWhileFactor = 16, kWhileFloor = 1024, kWhileCeiling = int64_t{1} << 20;
int64_t WhileLimit(std::optional<int64_t> recorded, int64_t override_limit);

// BadInput naming `where`, the node and the op, for the first call (in `graph` or a subgraph) of
// an op the dispatcher does not know, the ops in `registered_later` aside (host ops: the worker
// registers them before a run): what Compile would say, asked before anything runs (verify's
// read of its repro dirs: exit 2, not EAGER_FAILED per experiment).
[[nodiscard]] Status CheckOpsKnown(const ir::Graph& graph, const std::string& where,
                                   const std::set<std::string>& registered_later);

struct RunResult {
  std::vector<c10::IValue> outputs;                     // in output order
  std::unordered_map<std::string, c10::IValue> values;  // recorded node values
};

class Program {
 public:
  // `where` names the graph's source (file) in error messages. Unknown ops and arguments that
  // do not fit the op's schema are BadInput errors naming the node, the op and the argument.
  [[nodiscard]] static Expected<Program> Compile(const ir::Graph& graph, const std::string& where);

  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  // `inputs`: placeholder name -> tensor; `attrs`: get_attr target -> tensor.
  [[nodiscard]] Expected<RunResult> Run(const TensorMap& inputs, const TensorMap& attrs, const RunOptions& options = {}) const;
  // A subgraph's run, as its higher-order op makes it: the placeholders take `inputs` in order
  // (tensors and sizes already in the run's dtype and on its device); returns the outputs.
  [[nodiscard]] Expected<std::vector<c10::IValue>> RunPositional(const std::vector<c10::IValue>& inputs, const TensorMap& attrs,
                                                                 const RunOptions& options) const;

  const ir::Graph& graph() const;
  size_t num_ops() const;
  // For each output: whether its value depends on random numbers or uninitialized memory (an op
  // tagged nondeterministic_seeded, or an empty* allocation, anywhere upstream). A replay draws
  // its own numbers: such an output can be compared by shape, dtype and layout, not by value.
  std::vector<bool> RandomOutputs() const;

 private:
  struct Impl;
  struct Inputs;
  explicit Program(std::unique_ptr<Impl> impl);
  [[nodiscard]] Expected<RunResult> RunSteps(const Inputs& inputs, const TensorMap& attrs, const RunOptions& options,
                                             const sym::Bindings& symbols) const;
  std::unique_ptr<Impl> impl_;
};

// A symbolic graph's symbols for one run: each symbol a tensor input's dim names takes that dim's
// size; a symbol no input binds keeps its recorded hint. BadInput naming the symbol when two
// inputs disagree, a value leaves the symbol's range, or a guard does not hold.
[[nodiscard]] Expected<sym::Bindings> BindSymbols(const ir::Graph& graph, const TensorMap& inputs);

// Casts a floating tensor to options.float_dtype (others unchanged) and moves it to the device.
at::Tensor PrepareTensor(const at::Tensor& t, const RunOptions& options);

// `t` in the layout `meta` recorded (same values), when its strides differ and the recorded ones
// lay the tensor out densely without overlap; else `t` itself.
at::Tensor WithCapturedLayout(const at::Tensor& t, const std::optional<ir::TensorMeta>& meta);

}  // namespace parity::interp
