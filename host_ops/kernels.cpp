#include "host_ops/kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <set>
#include <type_traits>

#include "host_ops/wire.h"
#include "interpreter/batch.h"
#include "repro/graph.h"
#include "repro/graph_json.h"

namespace parity::host_ops {
using nlohmann::json;
namespace rq = runtime::requests;

namespace {

std::vector<std::unique_ptr<torch::Library>>& Libraries() {  // keep the registrations alive
  static std::vector<std::unique_ptr<torch::Library>> libs;
  return libs;
}

// What a host op leaves on the stack: the worker's results for it, on `device`.
void PushResults(const c10::FunctionSchema& schema, std::vector<at::Tensor> outs, const std::optional<c10::Device>& device,
                 torch::jit::Stack& stack) {
  if (device)
    for (auto& t : outs) t = t.to(*device);
  const auto& rets = schema.returns();
  if (rets.size() == 1 && rets[0].type()->kind() == c10::TypeKind::ListType) {
    stack.emplace_back(c10::List<at::Tensor>(outs));
    return;
  }
  if (outs.size() != rets.size())
    throw std::runtime_error("host op " + QualifiedName(schema) + " returned " + std::to_string(outs.size()) +
                             " tensors, its schema " + std::to_string(rets.size()));
  for (auto& t : outs) stack.emplace_back(std::move(t));
}

// The arguments an op writes (`Tensor(a!)` in its schema: a custom op's mutates_args). The worker
// answers with their values after the call after the op's own results (host_ops.py `run`).
std::vector<size_t> WrittenArgs(const c10::FunctionSchema& schema) {
  std::vector<size_t> out;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite()) out.push_back(i);
  }
  return out;
}

// Copies the written arguments' new values (the tail of `outs`, one per written tensor argument
// given) into the tensors the interpreter passed, and leaves the op's own results in `outs`.
void WriteBack(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> given, std::vector<at::Tensor>& outs) {
  std::vector<at::Tensor> targets;
  for (size_t i : WrittenArgs(schema)) {
    if (given[i].isNone()) continue;
    if (!given[i].isTensor())
      throw std::runtime_error("host op " + QualifiedName(schema) + " writes its argument " + schema.arguments()[i].name() +
                               ", which is not a tensor (a written list of tensors is not supported)");
    targets.push_back(given[i].toTensor());
  }
  if (targets.size() > outs.size())
    throw std::runtime_error("host op " + QualifiedName(schema) + ": the worker returned fewer tensors than it writes");
  const size_t first = outs.size() - targets.size();
  at::NoGradGuard no_grad;  // the write is the op's, below autograd
  for (size_t k = 0; k < targets.size(); ++k) targets[k].copy_(outs[first + k]);
  outs.resize(first);
}

// The dispatcher kernel of every host op (below autograd): arguments to the worker, results back
// on the device of the first tensor argument; the arguments it writes, written.
void HostKernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  const auto given = torch::jit::last(*stack, n);
  Encoder enc(/*collect=*/true, /*json_too=*/false);
  std::optional<c10::Device> device;
  enc.Call(schema, given, device);
  auto whole = [&] {
    Encoder full(/*collect=*/false, /*json_too=*/true);
    std::optional<c10::Device> ignored;
    return json{{"op", QualifiedName(schema)}, {"args", full.Call(schema, given, ignored)}};
  };
  Answer a = WorkerRoundTrip(rq::Host::kCall, enc, whole, 1, "host op " + QualifiedName(schema));
  WriteBack(schema, given, a.tensors);
  torch::jit::drop(*stack, n);
  PushResults(schema, std::move(a.tensors), device, *stack);
}

// The batch kernel of every host op (interpreter/batch.h): a run of consecutive host op calls in
// one worker request, a call's argument that is an earlier call's result as {"result": [call,
// output]} (it stays in the worker). A call's device is its first tensor argument's, or that of
// the call whose result it takes.
std::vector<torch::jit::Stack> HostBatch(const std::vector<interp::BatchCall>& calls) {
  auto encode = [&](Encoder& enc, std::vector<std::optional<c10::Device>>& devices) {
    json jcalls = json::array();
    for (size_t c = 0; c < calls.size(); ++c) {
      const auto& schema = calls[c].op->schema();
      json args = enc.Call(schema, calls[c].args, devices[c]);
      for (const auto& ref : calls[c].refs) {
        const int64_t output = std::max<int64_t>(ref.output, 0);
        enc.key += 'R';
        enc.Raw(ref.arg);
        enc.Raw(ref.call);
        enc.Raw(output);
        if (enc.json_too) args[ref.arg] = {{"result", {ref.call, output}}};
        if (!devices[c]) devices[c] = devices[ref.call];
      }
      if (enc.json_too) jcalls.push_back({{"op", QualifiedName(schema)}, {"args", std::move(args)}});
    }
    return jcalls;
  };
  Encoder enc(/*collect=*/true, /*json_too=*/false);
  std::vector<std::optional<c10::Device>> devices(calls.size());
  encode(enc, devices);
  auto whole = [&] {
    Encoder full(/*collect=*/false, /*json_too=*/true);
    std::vector<std::optional<c10::Device>> ignored(calls.size());
    json jcalls = encode(full, ignored);
    return json{{"op", jcalls[0]["op"]}, {"calls", std::move(jcalls)}};
  };
  Answer a = WorkerRoundTrip(rq::Host::kBatch, enc, whole, calls.size(), "host_batch of " + QualifiedName(calls[0].op->schema()));
  std::vector<torch::jit::Stack> out(calls.size());
  size_t next = 0;
  for (size_t c = 0; c < calls.size(); ++c) {
    const size_t k = a.counts[c];
    if (next + k > a.tensors.size()) throw std::runtime_error("host_batch: the worker's counts exceed its outputs");
    std::vector<at::Tensor> outs(a.tensors.begin() + static_cast<long>(next), a.tensors.begin() + static_cast<long>(next + k));
    next += k;
    PushResults(calls[c].op->schema(), std::move(outs), devices[c], out[c]);
  }
  return out;
}

// The backward of a host op call: the worker recomputes the op with autograd on the saved
// arguments and returns the vector-Jacobian product for the differentiable inputs.
struct HostBackward final : torch::autograd::Node {
  const c10::FunctionSchema* schema = nullptr;
  std::vector<c10::IValue> args;    // detached
  std::vector<size_t> diff;         // argument positions of the differentiable inputs
  std::vector<at::Tensor> outputs;  // detached, for the shape of a missing grad
  std::string name() const override { return "HostBackward(" + QualifiedName(*schema) + ")"; }
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    Encoder enc(/*collect=*/true, /*json_too=*/true);
    json jargs = json::array(), jgrads = json::array();
    std::optional<c10::Device> device;
    for (size_t i = 0; i < args.size(); ++i) jargs.push_back(enc.Arg(args[i], schema->arguments()[i].real_type(), device));
    for (size_t k = 0; k < outputs.size(); ++k) {
      at::Tensor g = k < grads.size() && grads[k].defined() ? grads[k] : at::zeros_like(outputs[k]);
      jgrads.push_back(enc.Arg(g, nullptr, device));
    }
    auto whole = [&] { return json{{"op", QualifiedName(*schema)}, {"args", jargs}, {"grads", jgrads}, {"diff", diff}}; };
    auto outs = WorkerRoundTrip(rq::Host::kBackward, enc, whole, 1, "host op " + QualifiedName(*schema) + " (backward)").tensors;
    for (auto& t : outs) t = device ? t.to(*device) : t;
    return outs;
  }
};

// Autograd nodes are intrusive_ptr-owned from torch 2.13 on, shared_ptr-owned before (2.11 builds).
constexpr bool kIntrusiveNodes = std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>;
using NodePtr =
    std::conditional_t<kIntrusiveNodes, c10::intrusive_ptr<torch::autograd::Node>, std::shared_ptr<torch::autograd::Node>>;
template <typename N>
auto MakeNode() {
  if constexpr (kIntrusiveNodes)
    return c10::make_intrusive<N>();
  else
    return std::make_shared<N>();
}

// The Autograd kernel: forward below autograd; when gradients are wanted, the outputs get a
// HostBackward node over the tensor arguments that require grad.
void HostAutogradKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<long>(n), stack->end());
  std::vector<size_t> diff;
  std::vector<at::Tensor> diff_inputs;
  for (size_t i = 0; i < n; ++i)
    if (args[i].isTensor() && args[i].toTensor().requires_grad()) {
      diff.push_back(i);
      diff_inputs.push_back(args[i].toTensor());
    }
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
  }
  if (!at::GradMode::is_enabled() || diff.empty()) return;
  auto node = MakeNode<HostBackward>();
  node->schema = &schema;
  for (auto& a : args) node->args.push_back(a.isTensor() ? c10::IValue(a.toTensor().detach()) : a);
  node->diff = diff;
  node->set_next_edges(torch::autograd::collect_next_edges(diff_inputs));
  const size_t nret = schema.returns().size();
  for (size_t k = 0; k < nret; ++k) {
    c10::IValue& v = (*stack)[stack->size() - nret + k];
    if (!v.isTensor()) continue;
    at::Tensor t = v.toTensor();
    node->outputs.push_back(t.detach());
    if (t.is_floating_point()) torch::autograd::set_history(t, NodePtr(node));
  }
}

Status RegisterOp(const std::string& name, const HostOp& op) {
  const std::string ns = name.substr(0, name.find("::")), local = name.substr(name.find("::") + 2);
  const auto [opname, overload] = ir::SplitOperatorName(name);
  if (c10::Dispatcher::singleton().findSchema({opname, overload})) return Status::Ok();  // registered in C++ already
  try {
    auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, ns, std::nullopt, __FILE__, __LINE__);
    lib->def(op.schema.c_str());
    lib->impl(local.c_str(), torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                             torch::CppFunction::makeFromBoxedFunction<&HostKernel>()));
    lib->impl(local.c_str(),
              torch::dispatch(c10::DispatchKey::Autograd, torch::CppFunction::makeFromBoxedFunction<&HostAutogradKernel>()));
    Libraries().push_back(std::move(lib));
    // An op that writes its arguments runs call by call: a batched call's argument may be an
    // earlier call's result, which stays in the worker and could not be written back.
    const auto handle = c10::Dispatcher::singleton().findSchema({opname, overload});
    static const auto batch = std::make_shared<const interp::BatchKernel>(&HostBatch);
    if (handle && WrittenArgs(handle->schema()).empty()) interp::RegisterBatchKernel({opname, overload}, batch);
  } catch (const std::exception& e) {
    return Error::BadInput("host op " + name + ": cannot register schema \"" + op.schema + "\": " + e.what());
  }
  return Status::Ok();
}

}  // namespace

Status Register(const std::string& name, const HostOp& op) {
  static std::mutex mu;
  static std::set<std::string> registered;  // "ns::op.overload"
  std::lock_guard<std::mutex> lock(mu);
  if (registered.count(name)) return Status::Ok();
  PARITY_RETURN_IF_ERROR(RegisterOp(name, op));  // a failed registration is tried again next time
  registered.insert(name);
  return Status::Ok();
}

}  // namespace parity::host_ops
