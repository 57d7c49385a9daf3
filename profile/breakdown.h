// What a profile says, computed from the facts the profiling child reports
// (tools/parity_capture/profiling/): speed as the dynamo runner's --performance reports it,
// the backend's time per kernel and per category (as Inductor's `-p` report groups them), each
// kernel's graph nodes and model source line, and the eager per-op table. Pure: no processes,
// no files, so tests drive it with hand-made reports.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "repro/graph.h"
#include "util/status.h"

namespace parity::profile {

// The categories, in report order. "extern": matmul/convolution work Inductor hands to ATen
// (cuBLAS, oneDNN, ...); "other": everything not a kernel (framework and Python overhead,
// other ATen calls).
const std::vector<std::string>& Categories();

// Medians with their spread, over warm iterations.
struct Timing {
  double median_ms = 0, p25_ms = 0, p75_ms = 0, min_ms = 0;
  int samples = 0;
};
[[nodiscard]] Expected<Timing> TimingOf(const nlohmann::json& times_ms, const std::string& where);

struct Speed {
  Timing eager, backend;
  double speedup = 0;           // eager median / backend median
  double compile_s = 0;         // the first (compiling) call
  double eager_peak_bytes = 0;  // during one iteration
  double backend_peak_bytes = 0;
  std::optional<double> compression_ratio;  // eager peak / backend peak (none when a peak is 0)
};

struct KernelRow {
  std::string name;                         // as the profiler names it
  std::string phase = "forward";            // or "backward": what the autograd engine ran in a train step
  std::string kernel;                       // the generated kernel or extern op it is; "" = not a kernel
  std::string category;                     // one of Categories()
  double time_us = 0;                       // per iteration: device time (CUDA) or self CPU time (CPU)
  double calls = 0;                         // per iteration
  double share = 0;                         // of the rows' total, 0..1
  std::vector<std::string> nodes;           // the graph's nodes it computes (provenance)
  std::vector<std::string> device_kernels;  // CUDA kernels it launched
  std::string source;                       // "file.py:12 code" of the model line, from the nodes' stack traces
};

struct CategoryRow {
  std::string category;
  double time_us = 0, share = 0;
  int kernels = 0;
};

struct Breakdown {
  std::vector<KernelRow> rows;  // by time, largest first
  std::vector<CategoryRow> categories;
  double total_us = 0;                 // sum of the rows, per iteration
  double profiled_wall_ms = 0;         // one profiled iteration's wall time
  std::optional<double> busy_percent;  // CUDA: device busy time / unprofiled iteration time
  double overhead_percent = 0;         // profiled vs unprofiled iteration wall time
};

struct Report {
  std::string model, backend, device, device_name, test, dtype, torch_version;
  int batch_size = 0;
  Speed speed;
  Breakdown compiled;  // the backend's run, per kernel
  Breakdown eager;     // per ATen op
  bool provenance = false;
  std::optional<std::string> trace;
  nlohmann::json kernel_bench;  // null unless --kernel
  nlohmann::json ToJson() const;
};

// The report of a child's result. `graph` (may be null) gives the nodes' stack traces.
[[nodiscard]] Expected<Report> ReportOf(const nlohmann::json& child, const ir::Graph* graph);

// The model line a set of nodes comes from: the innermost frame of their stack traces outside
// torch itself and generated code, as "file.py:LINE code"; "" when none is recorded.
std::string SourceLineOf(const std::vector<std::string>& nodes, const ir::Graph& graph);

// The terminal report: speed, categories, the top `top` kernels (with nodes and source line),
// busy %, and the eager top ops.
std::string ReportText(const Report& r, int top);

// The dynamo runner's performance CSV: its header and this report's row.
const std::vector<std::string>& PerformanceCsvHeader();
std::vector<std::string> PerformanceCsvRow(const Report& r);

}  // namespace parity::profile
