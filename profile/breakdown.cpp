#include "profile/breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace parity::profile {

using nlohmann::json;

const std::vector<std::string>& Categories() {
  static const std::vector<std::string> kCategories = {"pointwise", "reduction", "persistent_reduction",
                                                       "template",  "extern",    "other"};
  return kCategories;
}

namespace {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

std::vector<std::string> Strings(const json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& s : j)
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

// The rows of one profile, shares and categories filled in.
Breakdown BreakdownOf(const json& p, const ir::Graph* graph, double unprofiled_ms) {
  Breakdown b;
  for (const auto& r : p.value("rows", json::array())) {
    KernelRow row;
    row.name = r.value("name", "");
    row.phase = r.value("phase", "forward") == "backward" ? "backward" : "forward";
    row.kernel = r.value("kernel", json()).is_string() ? r["kernel"].get<std::string>() : "";
    row.category = r.value("category", "other");
    if (std::find(Categories().begin(), Categories().end(), row.category) == Categories().end()) row.category = "other";
    row.time_us = r.value("time_us", 0.0);
    row.calls = r.value("calls", 0.0);
    row.nodes = Strings(r.value("nodes", json::array()));
    row.device_kernels = Strings(r.value("device_kernels", json::array()));
    if (graph != nullptr) row.source = SourceLineOf(row.nodes, *graph);
    b.total_us += row.time_us;
    b.rows.push_back(std::move(row));
  }
  std::stable_sort(b.rows.begin(), b.rows.end(), [](const KernelRow& a, const KernelRow& c) { return a.time_us > c.time_us; });
  std::map<std::string, CategoryRow> by;
  for (auto& row : b.rows) {
    row.share = b.total_us > 0 ? row.time_us / b.total_us : 0;
    CategoryRow& c = by[row.category];
    c.category = row.category;
    c.time_us += row.time_us;
    c.kernels += row.kernel.empty() ? 0 : 1;
  }
  for (const auto& name : Categories()) {
    auto it = by.find(name);
    if (it == by.end()) continue;
    it->second.share = b.total_us > 0 ? it->second.time_us / b.total_us : 0;
    b.categories.push_back(it->second);
  }
  b.profiled_wall_ms = p.value("wall_ms", 0.0);
  if (p.contains("device_busy_us") && p["device_busy_us"].is_number() && unprofiled_ms > 0)
    b.busy_percent = 100.0 * p["device_busy_us"].get<double>() / 1e3 / unprofiled_ms;
  if (unprofiled_ms > 0) b.overhead_percent = 100.0 * (b.profiled_wall_ms - unprofiled_ms) / unprofiled_ms;
  return b;
}

json TimingJson(const Timing& t) {
  return {{"median_ms", t.median_ms}, {"p25_ms", t.p25_ms}, {"p75_ms", t.p75_ms}, {"min_ms", t.min_ms}, {"samples", t.samples}};
}

json BreakdownJson(const Breakdown& b) {
  json rows = json::array(), cats = json::array();
  for (const auto& r : b.rows)
    rows.push_back({{"name", r.name},
                    {"phase", r.phase},
                    {"kernel", r.kernel.empty() ? json() : json(r.kernel)},
                    {"category", r.category},
                    {"time_us", r.time_us},
                    {"calls", r.calls},
                    {"share", r.share},
                    {"nodes", r.nodes},
                    {"device_kernels", r.device_kernels},
                    {"source", r.source}});
  for (const auto& c : b.categories)
    cats.push_back({{"category", c.category}, {"time_us", c.time_us}, {"share", c.share}, {"kernels", c.kernels}});
  return {{"rows", rows},
          {"categories", cats},
          {"total_us", b.total_us},
          {"profiled_wall_ms", b.profiled_wall_ms},
          {"busy_percent", b.busy_percent ? json(*b.busy_percent) : json()},
          {"overhead_percent", b.overhead_percent}};
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Ms(double ms) { return ms >= 100 ? Fmt("%.1f ms", ms) : ms >= 1 ? Fmt("%.3f ms", ms) : Fmt("%.4f ms", ms); }

std::string Bytes(double b) {
  if (b >= 1e9) return Fmt("%.2f GB", b / 1e9);
  if (b >= 1e6) return Fmt("%.1f MB", b / 1e6);
  return Fmt("%.1f KB", b / 1e3);
}

std::string Cell(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s + std::string(width - s.size() + 1, ' ');
}

std::string Right(const std::string& s, size_t width) {
  return std::string(s.size() < width ? width - s.size() : 0, ' ') + s + " ";
}

std::string NodeList(const std::vector<std::string>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < 3; ++i) s += (i ? ", " : "") + nodes[i];
  if (nodes.size() > 3) s += " (+" + std::to_string(nodes.size() - 3) + ")";
  return s;
}

}  // namespace

Expected<Timing> TimingOf(const json& times_ms, const std::string& where) {
  if (!times_ms.is_array() || times_ms.empty()) return Error::Internal(where + ": no timed iterations");
  std::vector<double> v;
  for (const auto& t : times_ms) {
    if (!t.is_number()) return Error::Internal(where + ": a time is not a number");
    v.push_back(t.get<double>());
  }
  std::sort(v.begin(), v.end());
  Timing t;
  t.median_ms = Percentile(v, 0.5);
  t.p25_ms = Percentile(v, 0.25);
  t.p75_ms = Percentile(v, 0.75);
  t.min_ms = v.front();
  t.samples = static_cast<int>(v.size());
  return t;
}

std::string SourceLineOf(const std::vector<std::string>& nodes, const ir::Graph& graph) {
  for (const auto& name : nodes) {
    const ir::Node* n = graph.Find(name);
    if (n == nullptr) continue;
    if (std::string line = ir::ModelLine(n->stack_trace); !line.empty()) return line;
  }
  return "";
}

Expected<Report> ReportOf(const json& child, const ir::Graph* graph) {
  try {
    Report r;
    r.device = child.value("device", "cpu");
    r.device_name = child.value("device_name", "");
    r.torch_version = child.value("torch_version", "");
    r.provenance = child.value("provenance", false);
    if (child.contains("trace") && child["trace"].is_string()) r.trace = child["trace"].get<std::string>();
    r.kernel_bench = child.value("kernel_bench", json());
    const json& e = child.at("eager");
    const json& b = child.at("backend");
    PARITY_ASSIGN_OR_RETURN(r.speed.eager, TimingOf(e.at("times_ms"), "eager"));
    PARITY_ASSIGN_OR_RETURN(r.speed.backend, TimingOf(b.at("times_ms"), "backend"));
    r.speed.speedup = r.speed.backend.median_ms > 0 ? r.speed.eager.median_ms / r.speed.backend.median_ms : 0;
    r.speed.compile_s = b.value("compile_s", 0.0);
    r.speed.eager_peak_bytes = e.value("peak_mem_bytes", 0.0);
    r.speed.backend_peak_bytes = b.value("peak_mem_bytes", 0.0);
    if (r.speed.eager_peak_bytes > 0 && r.speed.backend_peak_bytes > 0)
      r.speed.compression_ratio = r.speed.eager_peak_bytes / r.speed.backend_peak_bytes;
    r.compiled = BreakdownOf(child.at("profile"), graph, r.speed.backend.median_ms);
    r.eager = BreakdownOf(child.at("eager_profile"), nullptr, r.speed.eager.median_ms);
    return r;
  } catch (const json::exception& ex) {
    return Error::Internal(std::string("the profiling child's result: ") + ex.what());
  }
}

json Report::ToJson() const {
  return {{"model", model},
          {"backend", backend},
          {"device", device},
          {"device_name", device_name},
          {"test", test},
          {"dtype", dtype},
          {"batch_size", batch_size},
          {"torch_version", torch_version},
          {"speed",
           {{"eager", TimingJson(speed.eager)},
            {"backend", TimingJson(speed.backend)},
            {"speedup", speed.speedup},
            {"compile_s", speed.compile_s},
            {"eager_peak_bytes", speed.eager_peak_bytes},
            {"backend_peak_bytes", speed.backend_peak_bytes},
            {"compression_ratio", speed.compression_ratio ? json(*speed.compression_ratio) : json()}}},
          {"breakdown", BreakdownJson(compiled)},
          {"eager_breakdown", BreakdownJson(eager)},
          {"provenance", provenance},
          {"trace", trace ? json(*trace) : json()},
          {"kernel_bench", kernel_bench}};
}

std::string ReportText(const Report& r, int top) {
  std::ostringstream o;
  const Speed& s = r.speed;
  auto spread = [](const Timing& t) {
    return Ms(t.median_ms) + " [" + Fmt("%.4g", t.p25_ms) + "-" + Fmt("%.4g", t.p75_ms) + "]";
  };
  o << r.model << "  " << r.backend << "  " << r.device << "  " << r.test << "  " << r.dtype << "   (torch " << r.torch_version
    << ", " << r.device_name << ")\n";
  o << "speed     eager " << spread(s.eager) << "   " << r.backend << " " << spread(s.backend) << "   speedup "
    << Fmt("%.2fx", s.speedup) << "   compile " << Fmt("%.2f s", s.compile_s) << "   (medians [p25-p75] of " << s.backend.samples
    << " warm iterations)\n";
  o << "memory    eager peak " << Bytes(s.eager_peak_bytes) << "   " << r.backend << " peak " << Bytes(s.backend_peak_bytes);
  if (s.compression_ratio) o << "   compression " << Fmt("%.2fx", *s.compression_ratio);
  o << "\n";
  const Breakdown& b = r.compiled;
  o << "profiled  " << Ms(b.profiled_wall_ms) << " per iteration under the profiler (" << Fmt("%+.1f%%", b.overhead_percent)
    << " overhead)";
  if (b.busy_percent) o << "; " << r.device << " busy " << Fmt("%.1f%%", *b.busy_percent) << " of the iteration";
  o << "\n\n";
  const std::string unit = r.device.rfind("cuda", 0) == 0 ? "device time" : "self CPU time";
  o << Cell("category", 22) << Right("time/iter", 12) << Right("share", 7) << Right("kernels", 8) << "\n";
  for (const auto& c : b.categories)
    o << Cell(c.category, 22) << Right(Ms(c.time_us / 1e3), 12) << Right(Fmt("%.1f%%", 100 * c.share), 7)
      << Right(std::to_string(c.kernels), 8) << "\n";
  o << Cell("total (" + unit + ")", 22) << Right(Ms(b.total_us / 1e3), 12) << Right("100.0%", 7) << "\n\n";
  o << "top " << std::min<size_t>(top, b.rows.size()) << " of " << b.rows.size() << " (" << unit << " per iteration)\n";
  o << Right("share", 6) << Right("time", 11) << Right("calls", 6) << Cell("category", 20) << Cell("kernel", 44)
    << Cell("graph nodes", 30) << "model line\n";
  for (size_t i = 0; i < b.rows.size() && i < static_cast<size_t>(top); ++i) {
    const KernelRow& k = b.rows[i];
    o << Right(Fmt("%.1f%%", 100 * k.share), 6) << Right(Ms(k.time_us / 1e3), 11) << Right(Fmt("%.3g", k.calls), 6)
      << Cell(k.category, 20) << Cell(k.phase == "backward" ? "bwd " + k.name : k.name, 44) << Cell(NodeList(k.nodes), 30)
      << k.source << "\n";
  }
  o << "\neager: top ATen ops of " << r.eager.rows.size() << " (" << unit << " per iteration)\n";
  for (size_t i = 0; i < r.eager.rows.size() && i < static_cast<size_t>(std::min(top, 8)); ++i) {
    const KernelRow& k = r.eager.rows[i];
    o << Right(Fmt("%.1f%%", 100 * k.share), 6) << Right(Ms(k.time_us / 1e3), 11) << Right(Fmt("%.3g", k.calls), 6)
      << (k.phase == "backward" ? "bwd " : "") << k.name << "\n";
  }
  if (!r.kernel_bench.is_null()) {
    o << "\nkernel " << r.kernel_bench.value("name", "") << " alone:\n";
    for (const auto& run : r.kernel_bench.value("runs", json::array())) {
      auto t = TimingOf(run.value("times_ms", json::array()), "kernel");
      if (!t.ok()) continue;
      const double gbs = run.value("bytes", 0.0) / (t->median_ms * 1e-3) / 1e9;
      o << "  " << Ms(t->median_ms) << " [" << Fmt("%.4g", t->p25_ms) << "-" << Fmt("%.4g", t->p75_ms) << "]  "
        << Fmt("%.2f GB/s", gbs) << "  " << run.value("kernel", "") << "  options " << run.value("options", json::object()).dump()
        << "\n";
    }
  }
  if (r.trace) o << "\ntrace: " << *r.trace << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  return o.str();
}

const std::vector<std::string>& PerformanceCsvHeader() {
  static const std::vector<std::string> kHeader = {"dev",
                                                   "name",
                                                   "batch_size",
                                                   "speedup",
                                                   "abs_latency",
                                                   "compilation_latency",
                                                   "compression_ratio",
                                                   "eager_peak_mem",
                                                   "dynamo_peak_mem"};
  return kHeader;
}

std::vector<std::string> PerformanceCsvRow(const Report& r) {
  // As the runner writes it: latency in ms, compilation in s, peak memory in GB.
  const Speed& s = r.speed;
  return {r.device.substr(0, r.device.find(':')),
          r.model,
          std::to_string(r.batch_size),
          Fmt("%.6f", s.speedup),
          Fmt("%.6f", s.backend.median_ms),
          Fmt("%.6f", s.compile_s),
          s.compression_ratio ? Fmt("%.6f", *s.compression_ratio) : "0",
          Fmt("%.6f", s.eager_peak_bytes / 1e9),
          Fmt("%.6f", s.backend_peak_bytes / 1e9)};
}

}  // namespace parity::profile
