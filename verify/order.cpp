#include "verify/order.h"

#include <algorithm>
#include <ostream>

#include "matrix/shard.h"

namespace parity::verify {
namespace fs = std::filesystem;

std::vector<experiment::ExperimentSpec> SelectShard(std::vector<experiment::ExperimentSpec> specs, const VerifyOptions& o, std::ostream& out) {
  if (o.shard.count <= 1) return specs;
  std::vector<std::string> keys;
  for (const auto& s : specs) keys.push_back(s.Fingerprint());
  const auto known = matrix::KnownCosts(o.cost_files);
  std::vector<experiment::ExperimentSpec> mine;
  for (size_t i : matrix::ShardItems(keys, matrix::CostsFor(keys, known), o.shard)) mine.push_back(std::move(specs[i]));
  out << "shard " << o.shard.Text() << (o.shard.source.empty() ? "" : " (from " + o.shard.source + ")") << ": " << mine.size()
      << " of " << keys.size() << " experiments" << (known.empty() ? "" : ", balanced by earlier wall times") << "\n";
  return mine;
}

std::vector<size_t> LongestFirst(const std::vector<Item>& items, std::vector<size_t> order, const std::vector<fs::path>& cost_files) {
  const auto known = matrix::KnownCosts(cost_files);
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

}  // namespace parity::verify
