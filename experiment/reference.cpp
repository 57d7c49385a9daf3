#include "experiment/reference.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/nextafter.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>

namespace parity::experiment {

namespace {

// The backward of a train run, and the forward results it adds to `out`. A graph captured with
// the gradients its program fed to its outputs (tangents) runs that vector-Jacobian product and
// reports every output; otherwise the first output is the scalar loss, differentiated alone.
Status Backward(const std::vector<c10::IValue>& outputs, const ReproDir& repro, const GraphEntry& g, const interp::RunOptions& ro,
                const std::function<at::Tensor(const at::Tensor&)>& moved, NamedTensors& out) {
  std::vector<at::Tensor> roots, grads;
  if (g.has_tangents()) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!outputs[k].isTensor()) return Error::Runtime("output " + std::to_string(k) + " is not a tensor");
      const at::Tensor& o = outputs[k].toTensor();
      out.emplace_back(OutputName(k), o.detach());
      if (k >= g.tangents.size() || g.tangents[k].empty() || !o.requires_grad()) continue;
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, repro.Tensor(g.tangents[k]));
      roots.push_back(o);
      grads.push_back(interp::PrepareTensor(moved(t), ro).to(o.scalar_type()));
    }
  } else {
    if (outputs.empty() || !outputs[0].isTensor() || outputs[0].toTensor().numel() != 1)
      return Error::BadInput("train mode: the graph's first output must be the scalar loss (capture with mode='train')");
    out.emplace_back("loss", outputs[0].toTensor().detach());
    roots.push_back(outputs[0].toTensor());
  }
  if (roots.empty()) return Status::Ok();  // nothing the program differentiated reaches an output
  try {
    torch::autograd::backward(roots, grads);
  } catch (const std::exception& e) {
    return Error::Runtime(std::string("backward: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace

at::Tensor UlpPerturbed(const at::Tensor& t, at::Generator& gen) {
  if (!t.defined() || !t.is_floating_point() || t.numel() == 0) return t;
  const at::Tensor cpu = t.to(at::kCPU);
  const at::Tensor up = at::rand(cpu.sizes(), gen, at::TensorOptions().dtype(at::kFloat)).lt(0.5);
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor toward = at::where(up, at::full_like(cpu, inf), at::full_like(cpu, -inf));
  return at::nextafter(cpu, toward).to(t.device());
}

Expected<NamedTensors> RunReference(const interp::Program& program, const ReproDir& repro, const GraphEntry& g,
                                    const std::string& mode, const ReferenceOptions& options) {
  at::manual_seed(options.seed);
  interp::RunOptions ro;
  ro.device = options.device;
  ro.while_limit = options.while_limit;
  ro.float_dtype = options.float_dtype;
  ro.hook = options.hook;
  PARITY_ASSIGN_OR_RETURN(auto inputs, repro.Inputs(g));
  PARITY_ASSIGN_OR_RETURN(auto attrs, repro.Attrs(g));
  std::optional<at::Generator> gen;
  if (options.ulp_seed) gen = at::make_generator<at::CPUGeneratorImpl>(*options.ulp_seed);
  // The calibration's move of every floating value the graph reads (identity without ulp_seed).
  auto moved = [&gen](const at::Tensor& t) { return gen ? UlpPerturbed(t, *gen) : t; };
  for (auto& [name, t] : inputs) t = moved(t);
  for (auto& [key, t] : attrs) t = moved(t);
  NamedTensors out;
  if (mode != "train") {
    PARITY_ASSIGN_OR_RETURN(auto r, program.Run(inputs, attrs, ro));
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      if (!r.outputs[k].isTensor()) return Error::Runtime("output " + std::to_string(k) + " is not a tensor");
      out.emplace_back(OutputName(k), r.outputs[k].toTensor().detach());
    }
    return out;
  }
  // Train: leaf tensors that require grad for the floating and complex parameters and inputs the
  // program differentiated (all of them when the capture does not say); the Python side asks the
  // same (standalone_graph.differentiable).
  auto differentiable = [](const at::Tensor& t) { return t.is_floating_point() || t.is_complex(); };
  std::vector<std::pair<std::string, at::Tensor>> params, grad_inputs;
  for (auto& [key, t] : attrs) {
    at::Tensor p = interp::PrepareTensor(t, ro).detach().clone();
    if (key.rfind("param/", 0) == 0 && differentiable(p) && g.Differentiates(key)) {
      p.requires_grad_(true);
      params.emplace_back(key, p);
    }
    t = p;
  }
  for (const ir::Node* n : g.graph.placeholders()) {
    if (!n->sym.empty()) continue;  // a size input: bound from the symbols
    at::Tensor x = interp::PrepareTensor(inputs.at(n->name()), ro).detach().clone();
    if (differentiable(x) && g.Differentiates(n->name())) {
      x.requires_grad_(true);
      grad_inputs.emplace_back(n->name(), x);
    }
    inputs[n->name()] = x;
  }
  // Parameters in the order the graph first reads them (the worker's named_parameters order).
  std::vector<std::pair<std::string, at::Tensor>> ordered;
  for (const ir::Node* n : g.graph.nodes())
    if (n->kind() == ir::NodeKind::kGetAttr)
      for (auto& pr : params)
        if (pr.first == n->target() && std::none_of(ordered.begin(), ordered.end(), [&](auto& o) { return o.first == pr.first; }))
          ordered.push_back(pr);
  ro.grad = true;
  ro.record_all = options.value_grads != nullptr;
  at::AutoGradMode enable(true);
  PARITY_ASSIGN_OR_RETURN(auto r, program.Run(inputs, attrs, ro));
  std::vector<std::pair<std::string, at::Tensor>> watched;  // value_grads' values, their gradients kept
  if (options.value_grads != nullptr)
    for (auto& [name, v] : r.values) {
      if (!v.isTensor() || !v.toTensor().requires_grad()) continue;
      at::Tensor t = v.toTensor();
      if (!t.is_leaf()) t.retain_grad();
      watched.emplace_back(name, t);
    }
  PARITY_RETURN_IF_ERROR(Backward(r.outputs, repro, g, ro, moved, out));
  for (auto& [name, t] : watched) {  // none reached it: zeros, as a reported gradient is
    const at::Tensor& gr = t.grad();
    (*options.value_grads)[name] = (gr.defined() ? (gr.is_sparse() ? gr.to_dense() : gr) : at::zeros_like(t)).detach().to(at::kCPU);
  }
  // A gradient is reported dense (a sparse one, nn.Embedding(sparse=True)'s, as its dense value):
  // the contract standalone.train_results shares.
  auto grad = [](const at::Tensor& t) {
    const at::Tensor& g = t.grad();
    if (!g.defined()) return at::zeros_like(t).detach();
    return (g.is_sparse() ? g.to_dense() : g).detach();
  };
  for (auto& [key, p] : ordered) out.emplace_back("grad/" + key, grad(p));
  for (auto& [name, x] : grad_inputs) out.emplace_back("grad/input/" + name, grad(x));
  at::NoGradGuard no_grad;
  for (auto& [key, p] : ordered) out.emplace_back("sgd/" + key, (p.detach() - kSgdLr * grad(p)));
  return out;
}

Expected<BackendRun> TimedReference(const interp::Program& program, const ReproDir& repro, const GraphEntry& g,
                                    const std::string& mode, const ReferenceOptions& options, int iterations, double prepare_s) {
  using Clock = std::chrono::steady_clock;
  BackendRun run;
  auto t0 = Clock::now();
  PARITY_ASSIGN_OR_RETURN(run.outputs, RunReference(program, repro, g, mode, options));
  run.compile_time_s = prepare_s + std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < iterations; ++i) {
    t0 = Clock::now();
    auto again = RunReference(program, repro, g, mode, options);
    if (!again.ok()) return again.error();
    run.run_times_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return run;
}

}  // namespace parity::experiment
