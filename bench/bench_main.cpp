// parity_bench: times library calls in-process and prints one JSON object, for
// bench/run_benchmarks.py to put next to the PyTorch tool doing the same job.
//   parity_bench interp DIR [--iters N] [--device cpu|cuda]   the interpreter on a repro dir
//   parity_bench same REF RES [--fp64 F] [--iters N]          same() on every tensor pair
#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "compare/same.h"
#include "interpreter/interpreter.h"
#include "repro/repro_dir.h"
#include "repro/safetensors.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
T Must(parity::Expected<T> e) {
  if (!e.ok()) {
    std::cerr << "parity_bench: " << e.error().message << "\n";
    std::exit(2);
  }
  return std::move(e).value();
}

void Sync(const c10::Device& d) {
  if (d.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(d.index() < 0 ? 0 : d.index());
}

template <typename F>
nlohmann::json Time(int warmup, int iters, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    f();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return {{"median_s", s[s.size() / 2]}, {"min_s", s.front()}, {"iters", iters}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parity_bench"};
  app.require_subcommand(1);
  std::string dir, ref, res, fp64, device = "cpu";
  int iters = 20, warmup = 3;
  auto* interp = app.add_subcommand("interp", "time the interpreter on a repro dir");
  interp->add_option("dir", dir)->required();
  interp->add_option("--iters", iters);
  interp->add_option("--warmup", warmup);
  interp->add_option("--device", device);
  auto* same = app.add_subcommand("same", "time same() over two safetensors files");
  same->add_option("ref", ref)->required();
  same->add_option("res", res)->required();
  same->add_option("--fp64", fp64);
  same->add_option("--iters", iters);
  same->add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  nlohmann::json out;
  if (*interp) {
    auto repro = Must(parity::ReproDir::Load(dir));
    const auto& g = repro.graphs().at(0);
    auto program = Must(parity::interp::Program::Compile(g.graph, g.file));
    parity::interp::RunOptions o;
    o.device = c10::Device(device);
    // Inputs and parameters are moved to the device once, outside the timed region.
    parity::interp::TensorMap inputs, attrs;
    for (auto& [k, v] : Must(repro.Inputs(g))) inputs[k] = parity::interp::PrepareTensor(v, o);
    for (auto& [k, v] : Must(repro.Attrs(g))) attrs[k] = parity::interp::PrepareTensor(v, o);
    out = Time(warmup, iters, [&] {
      auto r = program.Run(inputs, attrs, o);
      if (!r.ok()) { std::cerr << r.error().message << "\n"; std::exit(1); }
      Sync(o.device);
    });
    out["nodes"] = g.graph.size();
    out["ops"] = program.num_ops();
  } else {
    auto a = Must(parity::safetensors::File::Open(ref));
    auto b = Must(parity::safetensors::File::Open(res));
    std::optional<parity::safetensors::File> f;
    if (!fp64.empty()) f.emplace(Must(parity::safetensors::File::Open(fp64)));
    std::vector<std::tuple<at::Tensor, at::Tensor, std::optional<at::Tensor>>> pairs;
    int64_t bytes = 0;
    for (const auto& info : a.tensors()) {
      at::Tensor x = Must(a.Get(info.name)), y = Must(b.Get(info.name));
      std::optional<at::Tensor> z;
      if (f) z = Must(f->Get(info.name));
      bytes += x.nbytes() + y.nbytes() + (z ? z->nbytes() : 0);
      pairs.emplace_back(x, y, z);
    }
    bool pass = true;
    out = Time(warmup, iters, [&] {
      pass = true;
      for (auto& [x, y, z] : pairs) pass = parity::compare::SameTensor(x, y, z, {}).pass && pass;
    });
    out["bytes"] = bytes;
    out["pass"] = pass;
  }
  std::cout << out.dump() << "\n";
  return 0;
}
