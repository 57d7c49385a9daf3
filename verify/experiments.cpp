#include "verify/experiments.h"

#include "runtime/worker_requests.h"
#include "experiment/devices.h"
#include "verify/failure_repro.h"
#include "verify/record.h"

namespace parity::verify {

namespace {

// The experiment's device as records name it: the CPU's model, else the name its child reported,
// else slot 0's worker is asked (once; it may be serving a job then, and the driver waits).
std::string AcceleratorModel(Session& s, const std::string& device, const experiment::ExperimentResult& r) {
  if (device.rfind("cuda", 0) != 0) return matrix::CpuModel();
  if (!r.device_name.empty()) return r.device_name;
  if (!s.accelerator.empty()) return s.accelerator;
  auto resp = s.runner.Ask(runtime::requests::Ping());
  return s.accelerator = resp.ok() ? resp->value("device_name", std::string("cuda")) : std::string("cuda");
}

}  // namespace

void Prepare(std::vector<Item>& items, Session& s) {
  for (Item& item : items) {
    experiment::ExperimentSpec& spec = item.spec;
    item.from_repro = !spec.repro.empty();
    if (item.from_repro) item.repro = s.dirs.Find(spec.repro);
    if (std::string why = experiment::DeviceUnavailable(spec.device); !why.empty()) {  // a repro dir's own device
      experiment::ExperimentResult r;
      r.code = results::Code::kVerifierSkipped;
      r.error = "device " + spec.device + ": " + why;
      item.early = r;
    } else if (spec.repro.empty()) {
      const auto started = Item::Clock::now();
      auto captured = s.captures.Get(spec);
      item.capture_s = std::chrono::duration<double>(Item::Clock::now() - started).count();
      if (captured.ok()) {
        spec.repro = *captured;
        auto& read = s.captured[spec.repro];  // a capture serves every backend of its model: read once
        if (!read)
          if (auto r = ReproDir::Load(spec.repro); r.ok()) read = std::make_shared<const ReproDir>(std::move(*r));
        item.repro = read;
        continue;
      }
      experiment::ExperimentResult r;
      r.code = results::Code::kEagerFailed;
      r.phase = "capture";
      r.error = "capture failed: " + captured.error().Text();
      item.early = r;
    }
  }
  for (Item& item : items)  // read here, its digest checked: the experiment's child need not hash it again
    if (item.repro) item.spec.verified_tensors = item.repro->verified_tensors();
  std::vector<const experiment::ExperimentSpec*> specs;
  for (const Item& item : items) specs.push_back(&item.spec);
  const std::vector<std::string> names = FailureReproNames(specs);
  for (size_t i = 0; i < items.size(); ++i) items[i].failure_name = names[i];
}

results::Record Record(const Item& item, Session& s) {
  const auto started = Item::Clock::now();
  const experiment::ExperimentSpec& spec = item.spec;
  const experiment::ExperimentResult& r = item.attempts.front();
  RecordContext ctx;
  ctx.accelerator_model = AcceleratorModel(s, spec.device, r);
  ctx.job_wall_s = item.wall_s;
  ctx.capture_s = item.capture_s;
  ctx.batch_size = spec.batch_size;
  if (item.repro) {
    if (ctx.batch_size == 0 && !item.from_repro) ctx.batch_size = item.repro->manifest().batch_size;
    ctx.graphs = static_cast<int>(item.repro->graphs().size());
  }
  if ((r.code == results::Code::kFail || r.code == results::Code::kExceptionRaised) && !spec.repro.empty())
    if (auto dir = WriteFailureRepro(s.o.output_dir, item.failure_name, spec, r); dir.ok()) ctx.repro_dir = dir->string();
  if (item.from_repro) ctx.repro_input = spec.repro;
  ctx.attempts = item.attempts;
  ctx.reports_s = std::chrono::duration<double>(Item::Clock::now() - started).count();
  return RecordOf(spec, r, ctx);
}

}  // namespace parity::verify
