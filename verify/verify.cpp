#include "verify/verify.h"

#include <ATen/Context.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <set>

#include "repro/repro_dir.h"
#include "runtime/jobs.h"
#include "util/files.h"
#include "verifier/backend.h"
#include "verifier/case.h"
#include "verifier/devices.h"
#include "verifier/runner.h"
#include "verify/captures.h"
#include "verify/console.h"
#include "verify/failure_repro.h"
#include "verify/matrix.h"
#include "verify/record.h"

namespace parity::verify {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// One verify run's collaborators.
struct Session {
  const VerifyOptions& o;
  verifier::IsolatedRunner& runner;
  CaptureCache captures;
  std::string accelerator;  // asked once
};

std::string AcceleratorModel(Session& s, const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return CpuModel();
  if (!s.accelerator.empty()) return s.accelerator;
  auto resp = s.runner.Ask({{"cmd", "ping"}});
  return s.accelerator = resp.ok() ? resp->value("device_name", std::string("cuda")) : std::string("cuda");
}

std::vector<std::vector<std::string>> SlotEnv(const VerifyOptions& o) {
  return verifier::SlotEnvironmentsHere(o.experiment.jobs, UsesCuda(o));
}

// Whether the run's experiments talk to the Python worker: a backend that compiles there, suite
// models (captured there), approved host-op modules.
bool NeedsWorkers(const VerifyOptions& o) {
  if (!o.models.empty() || !o.experiment.imports.empty()) return true;
  for (const auto& b : o.backends) {
    auto info = verifier::FindBackend(b);
    if (!info.ok() || info->needs_worker) return true;
  }
  return false;
}

// This shard's part of the matrix, balanced by the costs of earlier runs.
std::vector<verifier::ExperimentSpec> SelectShard(std::vector<verifier::ExperimentSpec> specs, const VerifyOptions& o, std::ostream& out) {
  if (o.shard.count <= 1) return specs;
  std::vector<std::string> keys;
  for (const auto& s : specs) keys.push_back(s.Fingerprint());
  const auto known = KnownCosts(o.cost_files);
  std::vector<verifier::ExperimentSpec> mine;
  for (size_t i : ShardItems(keys, CostsFor(keys, known), o.shard)) mine.push_back(std::move(specs[i]));
  out << "shard " << o.shard.Text() << (o.shard.source.empty() ? "" : " (from " + o.shard.source + ")") << ": " << mine.size()
      << " of " << keys.size() << " experiments" << (known.empty() ? "" : ", balanced by earlier wall times") << "\n";
  return mine;
}

// One experiment of this run and its attempts.
struct Item {
  verifier::ExperimentSpec spec;
  bool from_repro = false;                // a repro dir given by the user, not a capture
  std::optional<verifier::ExperimentResult> early;  // decided before it could run
  std::vector<verifier::ExperimentResult> attempts;
  Clock::time_point started = Clock::now();
  double wall_s = 0.0;     // of the first attempt's job
  double capture_s = 0.0;  // its suite model's capture, when this experiment made it
};

// Suite models are captured (once, cached) before anything runs; an experiment that cannot run
// here gets its result now.
void Prepare(std::vector<Item>& items, Session& s) {
  for (Item& item : items) {
    verifier::ExperimentSpec& spec = item.spec;
    item.from_repro = !spec.repro.empty();
    if (std::string why = verifier::DeviceUnavailable(spec.device); !why.empty()) {  // a repro dir's own device
      verifier::ExperimentResult r;
      r.code = results::Code::kVerifierSkipped;
      r.error = "device " + spec.device + ": " + why;
      item.early = r;
    } else if (spec.repro.empty()) {
      const auto started = Clock::now();
      auto captured = s.captures.Get(spec);
      item.capture_s = std::chrono::duration<double>(Clock::now() - started).count();
      if (captured.ok()) {
        spec.repro = *captured;
        continue;
      }
      verifier::ExperimentResult r;
      r.code = results::Code::kEagerFailed;
      r.phase = "capture";
      r.error = "capture failed: " + captured.error().Text();
      item.early = r;
    }
  }
}

// The record of one experiment (its first attempt); a FAIL or EXCEPTION_RAISED also gets its
// repro dir.
results::Record Record(const Item& item, Session& s) {
  const auto started = Clock::now();
  const verifier::ExperimentSpec& spec = item.spec;
  const verifier::ExperimentResult& r = item.attempts.front();
  RecordContext ctx;
  ctx.accelerator_model = AcceleratorModel(s, spec.device);
  ctx.job_wall_s = item.wall_s;
  ctx.capture_s = item.capture_s;
  ctx.batch_size = spec.batch_size;
  if (!spec.repro.empty())
    if (auto repro = ReproDir::Load(spec.repro); repro.ok()) {
      if (ctx.batch_size == 0 && !item.from_repro) ctx.batch_size = repro->manifest().batch_size;
      ctx.graphs = static_cast<int>(repro->graphs().size());
    }
  if ((r.code == results::Code::kFail || r.code == results::Code::kExceptionRaised) && !spec.repro.empty())
    if (auto dir = WriteFailureRepro(s.o.output_dir, spec, r); dir.ok()) ctx.repro_dir = dir->string();
  if (item.from_repro) ctx.repro_input = spec.repro;
  ctx.attempts = item.attempts;
  ctx.reports_s = std::chrono::duration<double>(Clock::now() - started).count();
  return RecordOf(spec, r, ctx);
}

// `order` (positions in `items`) sorted by each experiment's expected cost, largest first: its
// wall time in an earlier run's records (--shard-costs), else its repro dir's tensor bytes (a
// larger model takes longer to compile and run). Ties keep the matrix order.
std::vector<size_t> LongestFirst(const std::vector<Item>& items, std::vector<size_t> order, const std::vector<fs::path>& cost_files) {
  const auto known = KnownCosts(cost_files);
  std::vector<double> seconds(items.size(), -1), bytes(items.size(), 0);
  for (size_t i : order) {
    if (auto it = known.find(items[i].spec.Fingerprint()); it != known.end()) seconds[i] = it->second;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(items[i].spec.repro, ec))
      if (e.path().extension() == ".safetensors") bytes[i] += static_cast<double>(e.file_size(ec));
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((seconds[a] >= 0) != (seconds[b] >= 0)) return seconds[a] >= 0;  // known costs first
    return seconds[a] >= 0 ? seconds[a] > seconds[b] : bytes[a] > bytes[b];
  });
  return order;
}

void Tally(VerifySummary& summary, Code code) {
  ++summary.total;
  if (code == results::Code::kPass)
    ++summary.passed;
  else if (code == results::Code::kVerifierSkipped)
    ++summary.skipped;
  else
    ++summary.failed;
}

// Runs the experiments, `jobs` at once, recording each as it ends (after its retries).
Status RunAll(std::vector<Item>& items, Session& s, const fs::path& run_dir, const VerifyHooks& hooks, VerifySummary& summary,
              VerifyConsole& console) {
  Status status = Status::Ok();
  // One attempt ended; false when the experiment is done (recorded).
  auto finish = [&](size_t i, const verifier::ExperimentResult& r) {
    Item& item = items[i];
    if (item.attempts.empty()) item.wall_s = std::chrono::duration<double>(Clock::now() - item.started).count();
    item.attempts.push_back(r);
    if (hooks.retry && hooks.retry(item.spec, item.attempts)) return true;
    results::Record record = Record(item, s);
    if (auto st = results::AppendRecord(summary.results_file, record); !st.ok() && status.ok()) status = st;
    summary.records.push_back(std::move(record));
    Tally(summary, item.attempts.front().code);
    console.Finished(i + 1, item.spec, item.attempts.front(), summary.records.back().metrics);
    return false;
  };
  verifier::ExperimentBatch batch;
  std::vector<size_t> index_of;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].early) {
      console.Started(i + 1, items[i].spec);
      while (finish(i, *items[i].early)) {
      }
      continue;
    }
    index_of.push_back(i);
  }
  // With several slots the longest first (the run ends when its longest experiment does); one
  // slot keeps the matrix's order.
  if (s.runner.jobs() > 1) index_of = LongestFirst(items, index_of, s.o.cost_files);
  for (size_t i : index_of) batch.emplace_back(items[i].spec, run_dir / ("exp" + std::to_string(i + 1)));
  s.runner.RunStream(
      std::move(batch), [&](size_t k, const verifier::ExperimentResult& r) { return finish(index_of[k], r); },
      [&](size_t k, const fs::path& dir) {
        Item& item = items[index_of[k]];
        if (item.attempts.empty()) item.started = Clock::now();
        console.Started(index_of[k] + 1, item.spec, dir);
      },
      [&] { console.Tick(); });
  return status;
}

}  // namespace

Expected<VerifySummary> Verify(const VerifyOptions& opts, std::ostream& out, const VerifyHooks& hooks) {
  VerifyOptions o = opts;
  o.experiment.cache_dir = fs::absolute(o.experiment.cache_dir.empty() ? verifier::DefaultCacheDir() : o.experiment.cache_dir);
  std::vector<BadDir> bad_dirs = SetAsideBadDirs(o);
  for (const auto& b : bad_dirs) out << "not verified: " << b.dir << ": " << b.error.message << "\n";
  if (!bad_dirs.empty() && o.repro_dirs.empty() && o.models.empty()) return bad_dirs.front().error;
  PARITY_RETURN_IF_ERROR(ValidateVerifyOptions(o));
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) return Error::BadInput("--output-dir " + o.output_dir.string() + ": " + ec.message());
  RemoveDeadProcessDirs(fs::temp_directory_path(), "parity-verify-");  // scratch of killed runs
  const fs::path run_dir = fs::temp_directory_path() / ("parity-verify-" + std::to_string(::getpid()));
  verifier::IsolatedRunner runner(run_dir, o.experiment.timeout_s, SlotEnv(o));
  // Each slot keeps its experiment process (libtorch and the device initialized once, a crashed,
  // hung or poisoned one replaced: runtime/jobs.h), and its worker starts now, prepared for a
  // backend's first compile: their start-up overlaps with everything below.
  runner.UsePersistentRunners();
  runner.Prestart(NeedsWorkers(o), UsesCuda(o) ? "cuda" : "cpu");
  Session s{o, runner, CaptureCache(o.experiment.cache_dir, [&](const nlohmann::json& req) { return runner.Ask(req); }), ""};
  PARITY_RETURN_IF_ERROR(ImportReproHostOps(o, [&](const nlohmann::json& req) { return runner.Ask(req); }));
  PARITY_ASSIGN_OR_RETURN(auto all, ExpandMatrix(o, [&] { return runner.Ask({{"cmd", "list_models"}}); }));

  VerifySummary summary;
  summary.bad_dirs = std::move(bad_dirs);
  summary.matrix = static_cast<int>(all.size());
  summary.results_file = o.output_dir / "results.jsonl";
  const std::set<std::string> done = results::DoneFingerprints(summary.results_file);
  std::vector<Item> items;
  for (auto& spec : SelectShard(std::move(all), o, out)) {
    if (done.count(spec.Fingerprint())) {
      ++summary.resumed;
      summary.fingerprints.push_back(spec.Fingerprint());
      continue;
    }
    summary.fingerprints.push_back(spec.Fingerprint());
    items.emplace_back();
    items.back().spec = std::move(spec);
  }
  VerifyConsole console(out, o.progress, items.size());
  Prepare(items, s);
  PARITY_RETURN_IF_ERROR(RunAll(items, s, run_dir, hooks, summary, console));
  RemoveAll(run_dir);
  console.Summary(summary);
  return summary;
}

}  // namespace parity::verify
