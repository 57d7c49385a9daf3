#include "host_ops/wire.h"

#include <cmath>
#include <mutex>
#include <unordered_map>

#include "repro/graph_json.h"
#include "runtime/shm.h"

namespace parity::host_ops {
using nlohmann::json;
using runtime::ShmSegment;
using runtime::ShmTensor;
using runtime::ShmLayout;
using runtime::TensorPool;
using runtime::LayOut;
using runtime::CopyTensors;
using runtime::DescribeTensors;
using runtime::ParseTensors;
using runtime::ReadTensors;

std::string QualifiedName(const c10::FunctionSchema& schema) {
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

json Encoder::Arg(const c10::IValue& v, c10::TypePtr type, std::optional<c10::Device>& device) {
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

json Encoder::Call(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> given, std::optional<c10::Device>& device) {
  Text(QualifiedName(schema));
  const auto& sargs = schema.arguments();
  json args = json::array();
  for (size_t i = 0; i < sargs.size(); ++i) {
    json j = Arg(given[i], sargs[i].real_type(), device);
    if (json_too) args.push_back(std::move(j));
  }
  return args;
}


namespace {

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
  WorkerCall call;  // where host op calls go (UseWorker)
};

Transport& Shm() {
  static Transport t;
  return t;
}

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

}  // namespace

Answer WorkerRoundTrip(runtime::requests::Host kind, Encoder& enc, const std::function<json()>& whole, size_t n_calls,
                       const std::string& what) {
  namespace rq = runtime::requests;
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
  if (kind != rq::Host::kBackward) {
    std::string key = std::string(rq::HostName(kind)) + '\0' + tr.args.path() + '\0' + enc.key;
    auto it = tr.plans.find(key);
    if (it != tr.plans.end()) {
      auto resp = tr.call(rq::HostRepeat(kind, it->second.id));
      if (resp.ok()) return ReadAnswer(tr, *resp, &it->second, n_calls, what);
      if (resp.error().exception_type != "UnknownPlan") throw std::runtime_error(what + ": " + resp.error().Text());
      tr.plans.clear();  // a restarted worker: every plan is sent whole again
    }
    if (tr.plans.size() >= 256) tr.plans.clear();
    plan = &tr.plans[std::move(key)];
    plan->id = tr.next_plan++;
  }
  auto resp = tr.call(rq::HostWhole(kind, whole(), tr.args.Describe(), DescribeTensors(layout, enc.tensors),
                                    plan ? std::optional<int>(plan->id) : std::nullopt));
  if (!resp.ok()) {
    if (plan) tr.plans.clear();  // not kept: the worker may not have it
    throw std::runtime_error(what + ": " + resp.error().Text());
  }
  return ReadAnswer(tr, *resp, plan, n_calls, what);
}

void UseWorker(WorkerCall call) {
  Transport& tr = Shm();  // plans and the result mapping belong to the worker calls reached
  std::lock_guard<std::mutex> lock(tr.mu);
  tr.plans.clear();
  tr.results = ShmSegment();
  tr.call = std::move(call);
}

}  // namespace parity::host_ops
