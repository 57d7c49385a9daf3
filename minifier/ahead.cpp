#include "minifier/ahead.h"

#include <utility>

namespace parity::minifier {

std::string AheadRunner::Key(const experiment::ExperimentSpec& spec, const std::filesystem::path& dir) {
  return spec.ToJson().dump() + "\n" + dir.string();
}

void AheadRunner::RunAhead(experiment::ExperimentBatch batch) {
  std::vector<std::string> keys;
  for (const auto& [spec, dir] : batch) keys.push_back(Key(spec, dir));
  auto results = inner_.RunMany(std::move(batch));
  for (size_t i = 0; i < results.size() && i < keys.size(); ++i) made_[keys[i]] = std::move(results[i]);
}

bool AheadRunner::Has(const experiment::ExperimentSpec& spec, const std::filesystem::path& dir) const {
  return made_.count(Key(spec, dir)) > 0;
}

std::vector<experiment::ExperimentResult> AheadRunner::RunMany(experiment::ExperimentBatch batch) {
  std::vector<experiment::ExperimentResult> out(batch.size());
  experiment::ExperimentBatch rest;
  std::vector<size_t> where;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = made_.find(Key(batch[i].first, batch[i].second));
    if (it != made_.end()) {
      out[i] = std::move(it->second);
      made_.erase(it);
    } else {
      rest.push_back(std::move(batch[i]));
      where.push_back(i);
    }
  }
  if (rest.empty()) return out;
  auto results = inner_.RunMany(std::move(rest));
  for (size_t k = 0; k < results.size() && k < where.size(); ++k) out[where[k]] = std::move(results[k]);
  return out;
}

int AheadRunner::DropUnused() {
  const int n = static_cast<int>(made_.size());
  made_.clear();
  return n;
}

}  // namespace parity::minifier
