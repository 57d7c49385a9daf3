// parity_bench: times library calls in-process and prints one JSON object, for
// bench/run_benchmarks.py to put next to the PyTorch tool doing the same job.
//   parity_bench interp DIR [--iters N] [--device cpu|cuda] [--import M]   the interpreter on a repro dir
//   parity_bench same REF RES [--fp64 F] [--iters N]          same() on every tensor pair
//   parity_bench kernel [--numel N] [--fp64] [--iters N]      the comparator's streaming kernel,
//                                                             hand-written vs Eigen, and a copy
#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/randn.h>

#include <cstring>

#include "compare/same.h"
#include "compare/stream_kernel.h"
#include "interpreter/interpreter.h"
#include "repro/repro_dir.h"
#include "repro/safetensors.h"
#include "host_ops/host_ops.h"
#include "runtime/worker.h"

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

#if PARITY_BENCH_EIGEN
namespace parity::bench {
template <typename A, typename B, bool kHasFp64>
void StreamBlockEigen(const A* a, const B* b, const double* f, int64_t start, int64_t len, double tol, bool equal_nan,
                      compare::detail::Partial& p);
}  // namespace parity::bench
#endif

namespace {

using parity::compare::detail::Partial;
using Kernel = void (*)(const float*, const float*, const double*, int64_t, int64_t, double, bool, Partial&);

// The comparator's driver shape (compare/stats.cpp): chunks of 16 blocks of 4096 in parallel,
// partials combined in order.
Partial RunKernel(Kernel k, const float* a, const float* b, const double* f, int64_t n) {
  constexpr int64_t kBlock = 4096, kPerChunk = 16;
  const int64_t nblocks = (n + kBlock - 1) / kBlock, nchunks = (nblocks + kPerChunk - 1) / kPerChunk;
  std::vector<Partial> parts(static_cast<size_t>(nchunks));
  at::parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    double abs_floor = -1, rel_floor = -1;
    for (int64_t c = c0; c < c1; ++c) {
      parts[c].abs_floor = abs_floor;
      parts[c].rel_floor = rel_floor;
      for (int64_t blk = c * kPerChunk; blk < std::min(nblocks, (c + 1) * kPerChunk); ++blk)
        k(a, b, f, blk * kBlock, std::min(kBlock, n - blk * kBlock), 1e-4, true, parts[c]);
      abs_floor = std::max(abs_floor, parts[c].max_abs);
      rel_floor = std::max(rel_floor, parts[c].max_rel);
    }
  });
  Partial t;
  for (const auto& p : parts) {
    t.mismatches += p.mismatches;
    t.sq_res_fp64 += p.sq_res_fp64;
    t.dot += p.dot;
    t.max_abs = std::max(t.max_abs, p.max_abs);
    t.max_rel = std::max(t.max_rel, p.max_rel);
  }
  return t;
}

nlohmann::json KernelBench(int64_t n, bool with_fp64, int warmup, int iters) {
  at::Tensor truth = at::randn({n}, at::kDouble);
  at::Tensor ref = truth.to(at::kFloat), res = truth.add(at::randn({n}, at::kDouble), 1e-6).to(at::kFloat);
  const float* a = ref.const_data_ptr<float>();
  const float* b = res.const_data_ptr<float>();
  const double* f = with_fp64 ? truth.const_data_ptr<double>() : nullptr;
  const int64_t bytes = n * 8 + (with_fp64 ? n * 8 : 0);
  Kernel hand = with_fp64 ? &parity::compare::detail::StreamBlock<float, float, true>
                          : &parity::compare::detail::StreamBlock<float, float, false>;
  nlohmann::json out = {{"numel", n}, {"bytes", bytes}, {"fp64", with_fp64}, {"agree", true}};
  out["handwritten"] = Time(warmup, iters, [&] { RunKernel(hand, a, b, f, n); });
#if PARITY_BENCH_EIGEN
  Kernel eigen =
      with_fp64 ? &parity::bench::StreamBlockEigen<float, float, true> : &parity::bench::StreamBlockEigen<float, float, false>;
  Partial ph = RunKernel(hand, a, b, f, n), pe = RunKernel(eigen, a, b, f, n);
  out["agree"] = ph.mismatches == pe.mismatches && ph.max_abs == pe.max_abs && ph.max_rel == pe.max_rel &&
                 std::abs(ph.dot - pe.dot) <= 1e-9 * std::abs(ph.dot);
  out["eigen"] = Time(warmup, iters, [&] { RunKernel(eigen, a, b, f, n); });
#endif
  // A plain parallel copy of the ref: the machine's streaming bandwidth (read + write counted).
  std::vector<float> dst(static_cast<size_t>(n));
  out["copy"] = Time(warmup, iters, [&] {
    at::parallel_for(0, n, 1 << 20, [&](int64_t i0, int64_t i1) { std::memcpy(dst.data() + i0, a + i0, (i1 - i0) * 4); });
  });
  out["copy_bytes"] = n * 8;
  return out;
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
  std::vector<std::string> imports;
  interp->add_option("--import", imports, "approve MODULE for the repro's host ops (they run in a worker)");
  auto* same = app.add_subcommand("same", "time same() over two safetensors files");
  same->add_option("ref", ref)->required();
  same->add_option("res", res)->required();
  same->add_option("--fp64", fp64);
  same->add_option("--iters", iters);
  same->add_option("--warmup", warmup);
  int64_t numel = 64 << 20;
  bool with_fp64 = false;
  auto* kernel = app.add_subcommand("kernel", "the comparator's streaming kernel: hand-written vs Eigen");
  kernel->add_option("--numel", numel);
  kernel->add_flag("--fp64", with_fp64);
  kernel->add_option("--iters", iters);
  kernel->add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  nlohmann::json out;
  if (*kernel) {
    out = KernelBench(numel, with_fp64, warmup, iters);
  } else if (*interp) {
    auto repro = Must(parity::ReproDir::Load(dir));
    if (auto st = parity::host_ops::PrepareHostOps(repro, imports, [](const nlohmann::json& r) { return parity::runtime::AskWorker(r); });
        !st.ok()) {
      std::cerr << "parity_bench: " << st.error().message << "\n";
      return 2;
    }
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
      if (!r.ok()) {
        std::cerr << r.error().message << "\n";
        std::exit(1);
      }
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
