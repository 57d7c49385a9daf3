// C++ backends built on parity's interpreter: `eager` (the reference itself, a sanity backend)
// and `fault` (fault injection for testing verification pipelines).
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/rand.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "experiment/backends/backends.h"
#include "experiment/reference.h"

namespace parity::experiment {

namespace {

// Runs the reference flow with an optional hook, timing the first and the following runs.
Expected<BackendRun> RunInterpreter(const ExperimentContext& ctx, const interp::NodeHook& hook) {
  const std::string where = (ctx.repro->root() / ctx.graph->file).string();
  PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(ctx.graph->graph, where));
  ReferenceOptions ro;
  ro.device = ctx.device;
  ro.hook = hook;
  return TimedReference(program, *ctx.repro, *ctx.graph, ctx.mode, ro, ctx.iterations);
}

class EagerBackend final : public Backend {
 public:
  Expected<BackendRun> Run(const ExperimentContext& ctx) override { return RunInterpreter(ctx, nullptr); }
};

// fault: runs the interpreter and injects a fault at every call of one ATen op.
//   op=aten::relu         the op (a target prefix: "aten::relu" matches "aten::relu.default")
//   kind=perturb|nan|noise|raise|segfault|abort|hang|oom
//   delta=0.01            perturb: value + delta; noise: value + delta * (call count)
//   relative=1            delta is relative to each element: perturb: value * (1 + delta);
//                         noise: value * (1 + delta * u), u uniform in [-1, 1] per element,
//                         drawn anew at every call (a kernel off by rounding-level noise)
//   occurrence=N          only the N-th node (graph order, 1-based) calling the op; default all
//   in=backend|eager      where to inject: the backend under test (default) or the verifier's
//                         own eager reference runs (EAGER_FAILED, NONDETERMINISTIC_EAGER_RUN)
//   phase=forward|backward   backward: the op's value stays, the gradient its backward receives
//                         is faulted (train mode; a wrong backward kernel)
//   only_on=DEVICE        a device-specific bug: injects only when the experiment runs on DEVICE
//                         (as the device string reads, e.g. cuda:0, or cpu:0 to stand in for one)
//   only_size=N           a size-specific bug: injects only into values with a dim of size N (a
//                         kernel wrong at one batch size or sequence length; --shapes sweep)
//   once=PATH             a flaky backend: only the first experiment to create PATH injects
//   rendezvous=DIR parties=N   each run waits (up to 120 s) until N experiments are in DIR at
//                         once, else raises: proves that experiments run in parallel
//   op2, kind2, delta2, occurrence2   a second, independent fault (two bugs in one graph)
class FaultBackend final : public Backend {
 public:
  Status Supports(const ExperimentContext& ctx) const override {
    if (!ctx.options.contains("op")) return Error::BadInput("backend fault needs --backend-option op=<aten op>");
    static const std::set<std::string> kinds = {"perturb", "nan", "noise", "raise", "segfault", "abort", "hang", "oom"};
    for (const char* k : {"kind", "kind2"}) {
      const std::string kind = ctx.options.value(k, "perturb");
      if (!kinds.count(kind))
        return Error::BadInput("backend fault: " + std::string(k) + " \"" + kind +
                               "\" is not one of perturb, nan, noise, raise, segfault, abort, hang, oom");
    }
    const std::string in = ctx.options.value("in", "backend");
    if (in != "backend" && in != "eager") return Error::BadInput("backend fault: in=\"" + in + "\", expected backend or eager");
    for (const char* k : {"phase", "phase2"}) {
      const std::string phase = ctx.options.value(k, "forward");
      if (phase != "forward" && phase != "backward")
        return Error::BadInput("backend fault: " + std::string(k) + "=\"" + phase + "\", expected forward or backward");
    }
    try {
      for (const char* k : {"delta", "delta2"})
        if (ctx.options.contains(k)) (void)std::stod(ctx.options[k].get<std::string>());
      for (const char* k : {"occurrence", "occurrence2", "parties", "only_size", "only_size2", "relative", "relative2"})
        if (ctx.options.contains(k)) (void)std::stoi(ctx.options[k].get<std::string>());
    } catch (const std::exception&) {
      return Error::BadInput("backend fault: delta, occurrence and only_size must be numbers");
    }
    return Status::Ok();
  }

  interp::NodeHook EagerHook(const ExperimentContext& ctx) const override {
    return ctx.options.value("in", "backend") == "eager" ? MakeHook(ctx) : nullptr;
  }

  Expected<BackendRun> Run(const ExperimentContext& ctx) override {
    PARITY_RETURN_IF_ERROR(Rendezvous(ctx));
    return RunInterpreter(ctx, ctx.options.value("in", "backend") == "backend" ? MakeHook(ctx) : nullptr);
  }

 private:
  static Status Rendezvous(const ExperimentContext& ctx) {
    if (!ctx.options.contains("rendezvous")) return Status::Ok();
    const std::filesystem::path dir = ctx.options["rendezvous"].get<std::string>();
    const size_t parties = static_cast<size_t>(std::stoi(ctx.options.value("parties", std::string("2"))));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(dir / std::to_string(::getpid()));
    for (int i = 0; i < 1200; ++i) {
      size_t n = 0;
      for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); ++it) ++n;
      if (n >= parties) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Error::Runtime("fault rendezvous: fewer than " + std::to_string(parties) + " experiments ran at once");
  }

  // One fault rule from the options with `suffix` ("" or "2"); none when op<suffix> is absent.
  static interp::NodeHook RuleHook(const ExperimentContext& ctx, const std::string& suffix) {
    if (!ctx.options.contains("op" + suffix)) return nullptr;
    auto opt = [&](const std::string& k, const std::string& d) { return ctx.options.value(k + suffix, d); };
    const std::string op = opt("op", "");
    const std::string kind = opt("kind", "perturb");
    const double delta = std::stod(opt("delta", "0.01"));
    const int occurrence = std::stoi(opt("occurrence", "0"));
    const int64_t only_size = std::stoll(opt("only_size", "-1"));
    std::string only;  // with occurrence=N: the name of the N-th matching node
    int seen = 0;
    for (const ir::Node* n : ctx.graph->graph.ops())
      if (n->target().rfind(op, 0) == 0 && ++seen == occurrence) only = n->name();
    const bool backward = opt("phase", "forward") == "backward";
    const bool relative = opt("relative", "0") == "1";
    auto calls = std::make_shared<int64_t>(0);  // across runs: "noise" differs run to run
    return [=](const ir::Node& n, c10::IValue& v) -> Status {
      if (n.target().rfind(op, 0) != 0 || (occurrence > 0 && n.name() != only)) return Status::Ok();
      ++*calls;
      const int64_t call = *calls;
      const std::string node = n.name(), target = n.target();
      // One tensor of the op's value (the value itself, or each of a list's: a foreach op's).
      auto fault = [&](at::Tensor t) -> Expected<at::Tensor> {
        if (only_size >= 0) {
          const auto sizes = t.sizes();
          if (std::find(sizes.begin(), sizes.end(), only_size) == sizes.end()) return t;
        }
        if (!backward) return Inject(kind, delta, relative, call, t, node, target);
        // phase=backward: the forward value stays; the gradient the op's backward receives is
        // faulted (a wrong backward kernel). Nothing happens where nothing is differentiated.
        if (t.requires_grad())
          t.register_hook([=](const at::Tensor& grad) {
            auto faulted = Inject(kind, delta, relative, call, grad, node, target);
            if (!faulted.ok()) throw std::runtime_error(faulted.error().message);
            return *faulted;
          });
        return t;
      };
      if (v.isTensor()) {
        PARITY_ASSIGN_OR_RETURN(at::Tensor t, fault(v.toTensor()));
        v = std::move(t);
      } else if (v.isTensorList()) {
        std::vector<at::Tensor> ts = v.toTensorVector();
        for (auto& t : ts) {
          PARITY_ASSIGN_OR_RETURN(at::Tensor f, fault(t));
          t = std::move(f);
        }
        v = c10::IValue(std::move(ts));
      }
      return Status::Ok();
    };
  }

  // `t` with the fault `kind` applied (or the fault's own failure).
  static Expected<at::Tensor> Inject(const std::string& kind, double delta, bool relative, int64_t call, const at::Tensor& t,
                                     const std::string& node, const std::string& target) {
    if (relative && (kind == "perturb" || kind == "noise") && t.is_floating_point()) {
      if (kind == "perturb") return t * (1.0 + delta);
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(call));
      const at::Tensor u = at::rand(t.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).mul(2.0).sub(1.0).to(t.device());
      return (t.to(at::kDouble) * (1.0 + delta * u)).to(t.scalar_type());
    }
    if (kind == "perturb") return t + delta;
    if (kind == "noise") return t + delta * static_cast<double>(call);
    if (kind == "nan") return t * std::numeric_limits<double>::quiet_NaN();
    if (kind == "raise") return Error::Runtime("fault injected: " + target + " raised (node " + node + ")");
    if (kind == "segfault") std::raise(SIGSEGV);
    if (kind == "abort") std::abort();
    if (kind == "hang")
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    if (kind == "oom") return at::empty({int64_t{1} << 50}, t.options());  // throws: out of memory
    return t;
  }

  // once=PATH: true for the one run that creates PATH (O_EXCL), false for every later one.
  static bool FirstRun(const ExperimentContext& ctx) {
    if (!ctx.options.contains("once")) return true;
    const int fd = ::open(ctx.options["once"].get<std::string>().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }

  static interp::NodeHook MakeHook(const ExperimentContext& ctx) {
    if (ctx.options.contains("only_on") && ctx.options["only_on"].get<std::string>() != ctx.device.str()) return nullptr;
    if (!FirstRun(ctx)) return nullptr;
    interp::NodeHook first = RuleHook(ctx, ""), second = RuleHook(ctx, "2");
    if (!second) return first;
    return [first, second](const ir::Node& n, c10::IValue& v) -> Status {
      PARITY_RETURN_IF_ERROR(first(n, v));
      return second(n, v);
    };
  }
};

}  // namespace

std::unique_ptr<Backend> MakeEagerBackend() { return std::make_unique<EagerBackend>(); }
std::unique_ptr<Backend> MakeFaultBackend() { return std::make_unique<FaultBackend>(); }

}  // namespace parity::experiment
