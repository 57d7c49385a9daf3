// How host op calls reach the worker: each call's arguments encoded (a key of everything the
// answer depends on but the tensors' contents; the JSON only when the worker has not seen the key),
// the tensors through shared memory both ways, and a request the worker has seen repeated by its
// plan id alone (docs/worker.md "Frames"). One call at a time, from any thread.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/worker_requests.h"
#include "util/status.h"

namespace parity::host_ops {

using WorkerCall = std::function<Expected<nlohmann::json>(const nlohmann::json& request)>;

// "ns::op.overload".
std::string QualifiedName(const c10::FunctionSchema& schema);

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
  nlohmann::json Arg(const c10::IValue& v, c10::TypePtr type, std::optional<c10::Device>& device);
  // One call's arguments (a JSON list when `json_too`).
  nlohmann::json Call(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> given, std::optional<c10::Device>& device);
};

struct Answer {
  std::vector<size_t> counts;       // results per call (host_batch)
  std::vector<at::Tensor> tensors;  // in order
};

// One request to the worker, `kind` with the tensors of `enc` in shared memory; `whole` builds the
// rest of it (without "shm", "tensors" and "plan"). host_call and host_batch go by plan;
// host_backward is sent whole each time. Throws (a dispatcher kernel's way) naming `what`.
Answer WorkerRoundTrip(runtime::requests::Host kind, Encoder& enc, const std::function<nlohmann::json()>& whole,
                       size_t n_calls, const std::string& what);

// Where host op calls go from now on; the plans and the result mapping of the worker reached
// before are dropped.
void UseWorker(WorkerCall call);

}  // namespace parity::host_ops
