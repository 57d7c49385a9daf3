// parity merge OUT SHARD...
#include <iostream>

#include "ci/merge.h"
#include "cli/commands.h"

namespace parity::cli {

void set_merge_command(CLI::App& app, int& exit_code) {
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("merge", "Merge shards' results (results.jsonl files or output dirs) into OUT");
  cmd->add_option("out", *out, "the merged output dir (OUT/results.jsonl, OUT/repros/)")->required();
  cmd->add_option("shards", *inputs, "shard output dirs or results.jsonl files")->required();
  cmd->callback([out, inputs, &exit_code] {
    std::vector<std::filesystem::path> paths(inputs->begin(), inputs->end());
    auto s = Unwrap(ci::Merge(*out, paths));
    for (const auto& c : s.conflicts) std::cerr << "conflict: " << c << "\n";
    std::cout << "merged " << paths.size() << " shard(s): " << s.records << " experiments, " << s.duplicates
              << " duplicates dropped, " << s.conflicts.size() << " conflicts (kept as attempts), " << s.repros
              << " repro dirs -> " << *out << "/results.jsonl\n";
    exit_code = 0;
  });
}

}  // namespace parity::cli
