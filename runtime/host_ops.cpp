#include "runtime/host_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "interpreter/batch.h"
#include "repro/graph.h"
#include "repro/graph_json.h"
#include "runtime/shm.h"
#include "util/files.h"

namespace parity::runtime {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Registry {
  std::mutex mu;
  WorkerCall call;                                         // where host op calls go
  std::set<std::string> registered;                        // "ns::op.overload"
  std::vector<std::unique_ptr<torch::Library>> libraries;  // keep the registrations alive
};

Registry& Reg() {
  static Registry r;
  return r;
}

bool Approved(const std::string& module, const std::vector<std::string>& approved) {
  // torch's own modules (ops torch registers from Python: torch.nn.modules.linear_cross_entropy,
  // inductor's prims): the worker runs torch already, so importing them runs no code from the dir.
  if (module == "torch" || module.rfind("torch.", 0) == 0) return true;
  for (const auto& a : approved)
    if (module == a || module.rfind(a + ".", 0) == 0) return true;
  return false;
}

// A node of `repro` calling `op`, for messages.
std::string NodeCalling(const ReproDir& repro, const std::string& op) {
  for (const auto& g : repro.graphs())
    for (const ir::Node* n : g.graph.nodes())
      if (n->target() == op) return g.name + ": %" + n->name();
  return "no node";
}

std::string QualifiedName(const c10::FunctionSchema& schema) {
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

// The arguments of host op calls as a request carries them: each tensor goes to `tensors` (CPU,
// contiguous; the k-th is named "t<k>" in the JSON) and every argument, tensors by dtype, shape and
// device, to `key`. The key is all the worker's answer depends on besides the tensors' contents:
// a request whose key the worker has seen sends only its plan id. So a call is encoded by a pass
// that collects (key and tensors, every time) and, the first time only, a pass that builds the
// JSON (`json_too`) without copying the tensors again.
struct Encoder {
  Encoder(bool collect, bool json_too) : collect(collect), json_too(json_too) {}
  const bool collect, json_too;
  std::vector<at::Tensor> tensors;
  size_t count = 0;  // tensors seen
  std::string key;

  template <typename T>
  void Raw(const T& v) {
    key.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void Text(const std::string& s) {
    Raw(s.size());
    key += s;
  }

  // One argument; `device` becomes the first tensor's device.
  // `type`: the schema's real type (ScalarType, not the int it is stored as), so a dtype
  // travels as a dtype; Optional[T] is read as T.
  json Arg(const c10::IValue& v, c10::TypePtr type, std::optional<c10::Device>& device) {
    if (type && type->kind() == c10::TypeKind::OptionalType) type = type->expectRef<c10::OptionalType>().getElementType();
    if (v.isNone()) {
      key += 'n';
      return nullptr;
    }
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!device) device = t.device();
      key += 'T';
      Raw(t.scalar_type());
      Raw(t.device().type());
      Raw(t.device().index());
      Text(std::string(reinterpret_cast<const char*>(t.sizes().data()), t.sizes().size() * sizeof(int64_t)));
      const std::string name = "t" + std::to_string(count++);
      if (collect) tensors.push_back(t.detach().to(at::kCPU).contiguous());
      if (!json_too) return nullptr;
      return {{"tensor", {{"key", name}, {"device", t.device().str()}}}};
    }
    if (v.isBool()) {
      key += v.toBool() ? 'B' : 'b';
      return v.toBool();
    }
    if (v.isInt()) {
      const bool dtype = type && type->kind() == c10::TypeKind::ScalarTypeType;
      key += dtype ? 'd' : 'i';
      Raw(v.toInt());
      if (!json_too) return nullptr;
      if (dtype) return {{"dtype", ir::TorchDtypeName(static_cast<c10::ScalarType>(v.toInt()))}};
      return v.toInt();
    }
    if (v.isDouble()) {
      key += 'f';
      Raw(v.toDouble());
      if (!json_too) return nullptr;
      return std::isfinite(v.toDouble()) ? json(v.toDouble()) : json{{"float", c10::str(v.toDouble())}};
    }
    if (v.isString()) {
      key += 's';
      Text(v.toStringRef());
      return json_too ? json(v.toStringRef()) : json();
    }
    if (v.isDevice()) {
      key += 'D';
      Text(v.toDevice().str());
      return json_too ? json{{"device", v.toDevice().str()}} : json();
    }
    if (v.isList() || v.isTuple()) {
      json out = json::array();
      c10::TypePtr elem;
      if (type && type->kind() == c10::TypeKind::ListType) elem = type->expectRef<c10::ListType>().getElementType();
      const auto items = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
      key += 'L';
      Raw(items.size());
      for (const auto& x : items) {
        json j = Arg(x, elem, device);
        if (json_too) out.push_back(std::move(j));
      }
      return out;
    }
    throw std::runtime_error("host op argument of type " + v.tagKind() + " is not supported");
  }

  // One call's arguments (a JSON list when `json_too`).
  json Call(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> given, std::optional<c10::Device>& device) {
    Text(QualifiedName(schema));
    const auto& sargs = schema.arguments();
    json args = json::array();
    for (size_t i = 0; i < sargs.size(); ++i) {
      json j = Arg(given[i], sargs[i].real_type(), device);
      if (json_too) args.push_back(std::move(j));
    }
    return args;
  }
};

// A request the worker has prepared, repeated with only its id; where its last results were.
struct Plan {
  int id = 0;
  bool answered = false;              // `outputs` and `counts` hold its last answer
  std::string results_path;           // the worker's segment they were in
  std::vector<ShmTensor> outputs;
  std::vector<size_t> counts;
};

// The shared memory of host op calls: this process's argument segment and its mapping of the
// worker's result segment. One call at a time.
struct Transport {
  std::mutex mu;
  ShmSegment args;     // ours, grown by replacement
  ShmSegment results;  // the worker's, remapped when it names another or a larger one
  // host_call / host_batch requests the worker has seen whole, by key (Encoder) and argument
  // segment: a repeat sends only the plan id (a host op in a loop parses, resolves and decodes
  // once), and when its results go where they went last time the answer says only {"same": true}.
  std::unordered_map<std::string, Plan> plans;
  int next_plan = 0;
  TensorPool pool;  // result tensors, refilled once the interpreter has let go of them
};

Transport& Shm() {
  static Transport t;
  return t;
}

struct Answer {
  std::vector<size_t> counts;       // results per call (host_batch)
  std::vector<at::Tensor> tensors;  // in order
};

// The worker's results: a full answer names its segment and outputs (kept in `plan`, when there
// is one), {"same": true} says they are where `plan`'s last results were.
Answer ReadAnswer(Transport& tr, const json& resp, Plan* plan, size_t n_calls, const std::string& what) {
  Answer a;
  const std::vector<ShmTensor>* outputs = nullptr;
  std::vector<ShmTensor> parsed;
  if (resp.value("same", false)) {
    if (!plan || !plan->answered || !tr.results.valid() || tr.results.path() != plan->results_path)
      throw std::runtime_error(what + ": the worker answered {\"same\": true} for a call whose results it never placed");
    outputs = &plan->outputs;
    a.counts = plan->counts;
  } else {
    const json& seg = resp.value("shm", json());
    if (!seg.is_object() || !seg.value("path", json()).is_string() || !seg.value("size", json()).is_number_unsigned())
      throw std::runtime_error(what + ": the worker's answer has no \"shm\" {path, size}");
    const std::string path = seg["path"].get<std::string>();
    const size_t size = seg["size"].get<size_t>();
    if (!tr.results.valid() || tr.results.path() != path || tr.results.size() < size) {
      tr.results = ShmSegment();
      auto mapped = ShmSegment::Open(path, size);
      if (!mapped.ok()) throw std::runtime_error(what + ": " + mapped.error().message);
      tr.results = std::move(*mapped);
    }
    auto p = ParseTensors(resp.value("outputs", json::array()), what + ": the worker's answer");
    if (!p.ok()) throw std::runtime_error(p.error().message);
    parsed = std::move(*p);
    outputs = &parsed;
    const json counts = resp.value("counts", json());
    if (counts.is_array()) {
      for (const auto& c : counts) {
        if (!c.is_number_integer() || c.get<int64_t>() < 0) throw std::runtime_error(what + ": the worker's \"counts\" holds " + c.dump());
        a.counts.push_back(c.get<size_t>());
      }
    } else if (n_calls == 1) {
      a.counts = {parsed.size()};
    }
    if (a.counts.size() != n_calls)
      throw std::runtime_error(what + ": the worker's answer has no \"counts\" for its " + std::to_string(n_calls) + " calls");
  }
  auto outs = ReadTensors(tr.results, *outputs, what + ": the worker's answer", &tr.pool);
  if (!outs.ok()) throw std::runtime_error(outs.error().message);
  a.tensors = std::move(*outs);
  if (plan && outputs == &parsed) {
    plan->answered = true;
    plan->results_path = tr.results.path();
    plan->outputs = std::move(parsed);
    plan->counts = a.counts;
  }
  return a;
}

// One request to the worker, `cmd` with the tensors of `enc` in shared memory; `whole` builds the
// rest of it (without "shm", "tensors" and "plan"). host_call and host_batch go by plan (see
// Transport); host_backward is sent whole each time.
Answer WorkerRoundTrip(const std::string& cmd, Encoder& enc, const std::function<json()>& whole, size_t n_calls,
                       const std::string& what) {
  WorkerCall call;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    call = Reg().call;
  }
  Transport& tr = Shm();
  std::lock_guard<std::mutex> lock(tr.mu);
  const ShmLayout layout = LayOut(enc.tensors);
  if (!tr.args.valid() || tr.args.size() < layout.bytes) {
    auto seg = ShmSegment::Create(std::max(layout.bytes, 2 * tr.args.size()));
    if (!seg.ok()) throw std::runtime_error(what + ": " + seg.error().message);
    tr.args = std::move(*seg);
  }
  CopyTensors(tr.args, layout, enc.tensors);
  Plan* plan = nullptr;
  if (cmd != "host_backward") {
    std::string key = cmd + '\0' + tr.args.path() + '\0' + enc.key;
    auto it = tr.plans.find(key);
    if (it != tr.plans.end()) {
      auto resp = call({{"cmd", cmd}, {"plan", it->second.id}});
      if (resp.ok()) return ReadAnswer(tr, *resp, &it->second, n_calls, what);
      if (resp.error().exception_type != "UnknownPlan") throw std::runtime_error(what + ": " + resp.error().Text());
      tr.plans.clear();  // a restarted worker: every plan is sent whole again
    }
    if (tr.plans.size() >= 256) tr.plans.clear();
    plan = &tr.plans[std::move(key)];
    plan->id = tr.next_plan++;
  }
  json request = whole();
  request["cmd"] = cmd;
  request["shm"] = tr.args.Describe();
  request["tensors"] = DescribeTensors(layout, enc.tensors);
  if (plan) request["plan"] = plan->id;
  auto resp = call(request);
  if (!resp.ok()) {
    if (plan) tr.plans.clear();  // not kept: the worker may not have it
    throw std::runtime_error(what + ": " + resp.error().Text());
  }
  return ReadAnswer(tr, *resp, plan, n_calls, what);
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
  Answer a = WorkerRoundTrip("host_call", enc, whole, 1, "host op " + QualifiedName(schema));
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
  Answer a = WorkerRoundTrip("host_batch", enc, whole, calls.size(), "host_batch of " + QualifiedName(calls[0].op->schema()));
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
    auto outs = WorkerRoundTrip("host_backward", enc, whole, 1, "host op " + QualifiedName(*schema) + " (backward)").tensors;
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

Status Register(const std::string& name, const HostOp& op) {
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
    Reg().libraries.push_back(std::move(lib));
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

fs::path ConfigPath() {
  if (const char* p = std::getenv("PARITY_CONFIG"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return fs::path(x) / "parity" / "config.json";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".config" / "parity" / "config.json";
  return {};
}

Expected<std::vector<std::string>> ApprovedImports(const std::vector<std::string>& flags) {
  std::vector<std::string> out = flags;
  const fs::path config = ConfigPath();
  if (config.empty() || !fs::exists(config)) return out;
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(config));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::BadInput(config.string() + ": not a JSON object");
  if (!j.contains("allowed_imports")) return out;
  if (!j["allowed_imports"].is_array()) return Error::BadInput(config.string() + ": field \"allowed_imports\" is not an array");
  for (const auto& m : j["allowed_imports"]) {
    if (!m.is_string()) return Error::BadInput(config.string() + ": field \"allowed_imports\" holds a non-string");
    out.push_back(m.get<std::string>());
  }
  return out;
}

std::vector<std::string> HostOpModules(const ReproDir& repro) {
  std::vector<std::string> out;
  for (const auto& [name, op] : repro.manifest().host_ops)
    if (!op.module.empty() && std::find(out.begin(), out.end(), op.module) == out.end()) out.push_back(op.module);
  return out;
}

Status CheckHostOpsApproved(const ReproDir& repro, const std::vector<std::string>& approved) {
  const std::string mw = (repro.root() / "manifest.json").string();
  for (const auto& [name, op] : repro.manifest().host_ops) {
    const std::string where = mw + ": host op " + name + " (" + NodeCalling(repro, name) + ")";
    if (op.module.empty())
      return Error::BadInput(where +
                             ": the manifest names no module that registers it (defined in a script run as "
                             "__main__?): capture with imports=[\"MODULE\"] (parity_capture.capture or dump_backend) "
                             "or set host_ops[\"" +
                             name + "\"].module in the manifest");
    if (!Approved(op.module, approved))
      return Error::BadInput(where + " needs module " + op.module + ", which parity imports only when allowed: pass --import " +
                             op.module + " (or list it under \"allowed_imports\" in " + ConfigPath().string() + ")");
  }
  return Status::Ok();
}

Status ImportHostOpModules(const ReproDir& repro, const std::vector<std::string>& approved, const WorkerCall& call) {
  const auto& ops = repro.manifest().host_ops;
  if (ops.empty()) return Status::Ok();
  PARITY_RETURN_IF_ERROR(CheckHostOpsApproved(repro, approved));
  if (auto r = call({{"cmd", "import_modules"}, {"modules", HostOpModules(repro)}}); !r.ok()) {
    const auto& [name, op] = *ops.begin();
    return Error::BadInput((repro.root() / "manifest.json").string() + ": host op " + name + " (" + NodeCalling(repro, name) +
                           "): importing its module " + op.module + " failed: " + r.error().message);
  }
  return Status::Ok();
}

Status PrepareHostOps(const ReproDir& repro, const std::vector<std::string>& approved, WorkerCall call) {
  const auto& ops = repro.manifest().host_ops;
  if (ops.empty()) return Status::Ok();
  PARITY_RETURN_IF_ERROR(ImportHostOpModules(repro, approved, call));
  {
    Transport& tr = Shm();  // plans and the result mapping belong to the worker calls reached
    std::lock_guard<std::mutex> shm_lock(tr.mu);
    tr.plans.clear();
    tr.results = ShmSegment();
  }
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().call = std::move(call);
  for (const auto& [name, op] : ops)
    if (!Reg().registered.count(name)) {
      PARITY_RETURN_IF_ERROR(Register(name, op));  // a failed registration is tried again next time
      Reg().registered.insert(name);
    }
  return Status::Ok();
}

}  // namespace parity::runtime
