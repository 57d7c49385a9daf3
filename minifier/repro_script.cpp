// The standalone repro.py written next to a minified repro dir: the graph as Python calling
// torch.ops directly, its real tensors from tensors.safetensors, eager vs the backend with
// the same() rules. Needs only torch and safetensors.
#include <cmath>
#include <sstream>

#include "minifier/minify.h"

namespace parity::minifier {

namespace {

std::string Var(const std::string& name) {
  std::string v = "v_";
  for (char c : name) v += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return v;
}

std::string PyStr(const std::string& s) { return nlohmann::json(s).dump(); }

std::string Py(const nlohmann::json& a) {
  if (a.is_null()) return "None";
  if (a.is_boolean()) return a.get<bool>() ? "True" : "False";
  if (a.is_number_integer()) return a.dump();
  if (a.is_number_float()) {
    std::ostringstream os;
    os.precision(17);
    os << a.get<double>();
    std::string s = os.str();
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
  }
  if (a.is_string()) return PyStr(a.get<std::string>());
  if (a.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + Py(a[i]);
    return s + "]";
  }
  const std::string tag = a.begin().key();
  const auto& v = a.begin().value();
  if (tag == "node") return Var(v.get<std::string>());
  if (tag == "float") return v.is_string() ? "float(" + PyStr(v.get<std::string>()) + ")" : Py(v.get<double>());
  if (tag == "dtype" || tag == "layout" || tag == "memory_format") return "torch." + v.get<std::string>();
  if (tag == "device") return "torch.device(DEVICE)";
  return "None";
}

std::string Target(const std::string& t) {
  if (t == "getitem") return "operator.getitem";
  auto sep = t.find("::");
  std::string ns = t.substr(0, sep), rest = t.substr(sep + 2);
  auto dot = rest.find('.');
  std::string op = rest.substr(0, dot), ov = dot == std::string::npos ? "default" : rest.substr(dot + 1);
  return "torch.ops." + ns + "." + op + "." + ov;
}

}  // namespace

std::string ReproScript(const std::string& graph_file, const nlohmann::json& manifest, const nlohmann::json& graph) {
  const auto& entry = manifest["graphs"][0];
  const std::string backend = manifest.contains("backend") ? manifest["backend"].value("name", "eager") : "eager";
  const nlohmann::json options = manifest.contains("backend") ? manifest["backend"].value("options", nlohmann::json::object())
                                                              : nlohmann::json::object();
  std::ostringstream py;
  py << "#!/usr/bin/env python3\n"
     << "\"\"\"Standalone repro written by `parity minify` (needs only torch and safetensors).\n\n"
     << "Graph: " << graph_file << ". Backend: " << backend << " " << options.dump() << ".\n"
     << "Failure: " << manifest.value("failure", nlohmann::json()).dump() << "\n"
     << "Runs the graph eagerly, in float64, and with the backend; checks as torch._dynamo.utils.same\n"
     << "does; exits 1 when the backend's result fails the check (the bug reproduces).\n\"\"\"\n"
     << "import operator\nimport os\nimport sys\n\nimport torch\nfrom safetensors.torch import load_file\n\n"
     << "HERE = os.path.dirname(os.path.abspath(__file__))\n"
     << "T = load_file(os.path.join(HERE, " << PyStr(manifest.value("tensors", "tensors.safetensors")) << "))\n"
     << "DEVICE = " << PyStr(manifest.value("device", "cpu")) << "\n"
     << "BACKEND = " << PyStr(backend) << "\n"
     << "OPTIONS = " << options.dump() << "\n"
     << "TOL = " << Py(manifest.value("failure", nlohmann::json::object()).value("tol", 1e-4)) << "\n";
  std::vector<std::string> params;
  for (const auto& n : graph["nodes"])
    if (n["op"] == "placeholder") params.push_back(n["name"].get<std::string>());
  py << "INPUTS = [";
  for (size_t i = 0; i < params.size(); ++i) py << (i ? ", " : "") << "T[" << PyStr(entry["inputs"][params[i]]) << "]";
  py << "]\n\n\ndef forward(attrs";
  for (const auto& p : params) py << ", " << Var(p);
  py << "):\n";
  for (const auto& n : graph["nodes"]) {
    const std::string op = n["op"];
    if (op == "get_attr") py << "    " << Var(n["name"]) << " = attrs[" << PyStr(n["target"]) << "]\n";
    if (op == "call_function") {
      py << "    " << Var(n["name"]) << " = " << Target(n["target"]) << "(";
      bool first = true;
      for (const auto& a : n.value("args", nlohmann::json::array())) { py << (first ? "" : ", ") << Py(a); first = false; }
      const nlohmann::json kwargs = n.value("kwargs", nlohmann::json::object());
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        py << (first ? "" : ", ") << it.key() << "=" << Py(it.value());
        first = false;
      }
      py << ")";
      if (n.contains("meta") && n["meta"].contains("module_path")) py << "  # " << n["meta"]["module_path"].get<std::string>();
      py << "\n";
    }
    if (op == "output") py << "    return " << Py(n["args"][0]) << "\n";
  }
  py << R"PY(

def parse(v):
    if isinstance(v, str):
        if v in ("True", "False"):
            return v == "True"
        for cast in (int, float):
            try:
                return cast(v)
            except ValueError:
                pass
    return v


def run(fn, dtype=None):
    cast = lambda t: t.to(DEVICE, dtype) if dtype is not None and t.is_floating_point() else t.to(DEVICE)
    attrs = {k: cast(v) for k, v in T.items()}
    torch.manual_seed(1337)
    with torch.no_grad():
        return [o.detach().cpu() for o in fn(attrs, *[cast(x) for x in INPUTS])]


def same(ref, res, fp64):
    if ref.dtype != res.dtype:
        return False
    if torch.allclose(ref, res, atol=TOL, rtol=TOL, equal_nan=True):
        return True
    if not ref.is_floating_point():
        return False
    rmse = lambda a, b: torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()
    mult = 3.0 if res.dtype in (torch.float16, torch.bfloat16) or fp64.numel() < 1000 or TOL >= 2e-2 else 2.0
    return rmse(fp64, res) <= mult * rmse(fp64, ref) + TOL / 10.0


def main():
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    python_backends = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
    name = BACKEND[len("torch_compile:"):] if BACKEND.startswith("torch_compile:") else BACKEND
    if BACKEND not in python_backends and not BACKEND.startswith("torch_compile:"):
        print(f"backend {BACKEND} runs in parity's C++ runtime: parity repro run {HERE} --backend {BACKEND}")
        return 2
    ref = run(forward)
    fp64 = run(forward, torch.float64)
    opts = {k: parse(v) for k, v in OPTIONS.items()}
    torch._dynamo.reset()
    if name == "inductor":
        import torch._inductor.config as cfg
        with cfg.patch(dict(opts, fallback_random=True)):
            res = run(torch.compile(forward, backend="inductor"))
    else:
        res = run(torch.compile(forward, backend=name, options=opts or None))
    bad = [i for i, (a, b, c) in enumerate(zip(ref, res, fp64)) if not same(a, b, c)]
    for i, (a, b) in enumerate(zip(ref, res)):
        err = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        print(f"output {i}: {'FAIL' if i in bad else 'ok'} max abs error {err:.3g}")
    print("REPRODUCED: the backend's result fails the check" if bad else "not reproduced")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
)PY";
  return py.str();
}

}  // namespace parity::minifier
