#include "verify/run_repro.h"

#include <ATen/ops/equal.h>

#include <chrono>
#include <cstring>
#include <sstream>

#include "compare/compare_files.h"
#include "interpreter/interpreter.h"

namespace parity::verify {

namespace {

// Same bytes: dtype, shape and every element's bit pattern (NaNs in the same places with the
// same payloads compare equal, unlike at::equal).
bool BitwiseEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  if (x.const_data_ptr() == nullptr || y.const_data_ptr() == nullptr) return false;  // no storage to read: same() decides
  return std::memcmp(x.const_data_ptr(), y.const_data_ptr(), static_cast<size_t>(x.nbytes())) == 0;
}

// One output against the one stored at capture: a replay identical to eager bit for bit matches
// (NaN and Inf included); one drawn from random numbers or uninitialized memory is compared by
// what a replay can reproduce (shape, dtype, layout); the rest by same().
compare::Verdict CompareOutput(const at::Tensor& expected, const at::Tensor& res, const std::optional<at::Tensor>& fp64, bool random,
                               const compare::SameOptions& same) {
  compare::Verdict v;
  if (BitwiseEqual(expected, res)) {
    v.pass = true;
    v.rule = compare::Rule::kBitwise;
    return v;
  }
  if (random) {
    v.rule = compare::Rule::kRandom;
    v.pass = res.sizes() == expected.sizes() && res.scalar_type() == expected.scalar_type() && res.layout() == expected.layout();
    if (!v.pass)
      v.message = "a random output of shape " + c10::str(res.sizes()) + " " + c10::toString(res.scalar_type()) +
                  ", stored " + c10::str(expected.sizes()) + " " + c10::toString(expected.scalar_type());
    return v;
  }
  return compare::SameTensor(expected, res, fp64, same);
}

// The outputs under test, given rather than run (RunReproOptions::under_test), as a run's result.
Expected<interp::RunResult> UnderTest(const std::function<Expected<std::vector<at::Tensor>>(size_t)>& given, size_t graph) {
  PARITY_ASSIGN_OR_RETURN(std::vector<at::Tensor> outs, given(graph));
  interp::RunResult r;
  for (auto& t : outs) r.outputs.emplace_back(std::move(t));
  return r;
}

}  // namespace

Expected<ReproRunReport> RunRepro(const ReproDir& repro, const RunReproOptions& options) {
  if (options.backend != "eager") return Error::BadInput("--backend \"" + options.backend + "\": repro run supports: eager");
  ReproRunReport report;
  for (size_t gi = 0; gi < repro.graphs().size(); ++gi) {
    const GraphEntry& g = repro.graphs()[gi];
    const std::string where = (repro.root() / g.file).string();
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(g.graph, where));
    if (g.expected_outputs.empty())
      return Error::BadInput((repro.root() / "manifest.json").string() + ": graph \"" + g.name +
                             "\" has no expected_outputs to compare with");
    PARITY_ASSIGN_OR_RETURN(auto inputs, repro.Inputs(g));
    PARITY_ASSIGN_OR_RETURN(auto attrs, repro.Attrs(g));
    PARITY_ASSIGN_OR_RETURN(auto expected, repro.ExpectedOutputs(g));

    GraphRunReport gr;
    gr.graph = g.name;
    gr.num_ops = static_cast<int64_t>(program.num_ops());
    interp::RunOptions ro;
    ro.device = options.device;
    ro.float_dtype = options.dtype;
    ro.while_limit = options.while_limit;
    ro.collectives = options.collectives;
    const auto t0 = std::chrono::steady_clock::now();
    Expected<interp::RunResult> run = options.under_test ? UnderTest(options.under_test, gi) : program.Run(inputs, attrs, ro);
    gr.run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!run.ok()) {
      if (run.error().kind == ErrorKind::kBadInput) return run.error();
      gr.error = run.error().message;
      report.pass = false;
      report.graphs.push_back(std::move(gr));
      continue;
    }
    std::optional<interp::RunResult> ref64;
    if (options.fp64_reference) {
      interp::RunOptions r64 = ro;
      r64.float_dtype = c10::kDouble;
      auto r = program.Run(inputs, attrs, r64);
      gr.fp64_ran = r.ok();
      if (r.ok())
        ref64 = std::move(*r);
      else
        gr.fp64_error = r.error().message;  // no fp64 reference: same() falls back to allclose only
    }
    const std::vector<bool> random = program.RandomOutputs();
    gr.pass = true;
    for (size_t k = 0; k < expected.size(); ++k) {
      const std::string name = k < g.output_names.size() ? g.output_names[k] : "output" + std::to_string(k);
      const c10::IValue& got = run->outputs[k];
      compare::Verdict v;
      if (!got.isTensor()) {
        v.pass = false;
        v.rule = compare::Rule::kStructure;
        v.message = "the graph returned " + got.tagKind() + ", expected a tensor";
      } else {
        at::Tensor res = got.toTensor().to(at::kCPU);
        if (res.scalar_type() != expected[k].scalar_type()) res = res.to(expected[k].scalar_type());
        std::optional<at::Tensor> f;
        if (ref64 && ref64->outputs[k].isTensor()) f = ref64->outputs[k].toTensor().to(at::kCPU);
        v = CompareOutput(expected[k], res, f, k < random.size() && random[k], options.same);
        if (v.rule == compare::Rule::kBitwise || (res.sizes() == expected[k].sizes() && at::equal(res, expected[k])))
          ++gr.bitwise_equal;
        if (!options.under_test && v.pass && (v.rule == compare::Rule::kRmse || v.rule == compare::Rule::kNanEscape)) {
          // The fp64 reference is recomputed from the very tensors under test: data that changed
          // since capture would move it too, so it must not excuse a mismatch here.
          v.pass = false;
          v.message = "differs from the output stored at capture beyond tol " + std::to_string(options.same.tol) +
                      " (allclose fails; an fp64 reference recomputed from these same tensors cannot excuse it)";
        }
      }
      gr.pass = gr.pass && v.pass;
      gr.outputs.emplace_back(name, std::move(v));
    }
    report.pass = report.pass && gr.pass;
    report.graphs.push_back(std::move(gr));
  }
  return report;
}

nlohmann::json ReproRunReport::ToJson() const {
  nlohmann::json gs = nlohmann::json::array();
  for (const auto& g : graphs) {
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& [name, v] : g.outputs) {
      auto j = v.ToJson();
      j["path"] = name;
      outs.push_back(j);
    }
    nlohmann::json jg = {{"graph", g.graph},
                         {"pass", g.pass},
                         {"num_ops", g.num_ops},
                         {"run_ms", g.run_ms},
                         {"bitwise_equal_outputs", g.bitwise_equal},
                         {"outputs", outs}};
    if (!g.error.empty()) jg["error"] = g.error;
    if (g.error.empty()) jg["fp64_reference"] = g.fp64_ran;
    if (!g.fp64_error.empty()) jg["fp64_error"] = g.fp64_error;
    gs.push_back(jg);
  }
  return {{"pass", pass}, {"graphs", gs}};
}

std::string ReproRunReport::ToText() const {
  std::ostringstream os;
  for (const auto& g : graphs) {
    os << "graph " << g.graph << ": " << g.num_ops << " ops, " << g.run_ms << " ms, " << g.bitwise_equal << "/"
       << g.outputs.size() << " outputs bitwise equal to capture\n";
    if (!g.error.empty())
      os << "  ERROR: " << g.error << "\n";
    else
      os << compare::VerdictTable(g.outputs);
  }
  os << (pass ? "PASS" : "FAIL") << "\n";
  return os.str();
}

}  // namespace parity::verify
