// parity backends [--json]: each backend, available or not and why.
#include <iostream>

#include "cli/commands.h"
#include "experiment/backend.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"

namespace parity::cli {

namespace {
// The dynamo backends registered in the worker's torch (out-of-tree ones too, through the
// torch_dynamo_backends entry point), each runnable as torch_compile:<name>.
void AddDynamoBackends(nlohmann::json& list) {
  auto resp = runtime::AskWorker(runtime::requests::ListBackends());
  if (!resp.ok()) {
    list.push_back({{"name", "torch_compile:<name>"},
                    {"kind", "python worker"},
                    {"available", false},
                    {"why", "cannot list the worker's dynamo backends: " + resp.error().message},
                    {"description", ""}});
    return;
  }
  for (const auto& b : (*resp)["backends"])
    list.push_back({{"name", "torch_compile:" + b.get<std::string>()},
                    {"kind", "python worker"},
                    {"available", true},
                    {"why", ""},
                    {"description", "dynamo backend \"" + b.get<std::string>() + "\" registered in the worker's torch"}});
}

// The torch parity was built against and the worker's: exit 2 when they are two builds.
nlohmann::json TorchBuilds() {
  nlohmann::json t = {{"built_against", runtime::BuiltTorch()}, {"cuda", PARITY_TORCH_CUDA_BUILT}};
  auto pong = runtime::AskWorker(runtime::requests::Ping());
  if (!pong.ok()) {
    t["worker"] = "unknown: " + pong.error().message;
    return t;
  }
  t["worker"] = pong->value("torch_version", std::string()) + " " + pong->value("git_version", std::string());
  t["worker_python"] = pong->value("python", std::string());
  if (pong->contains("torch_mismatch")) throw Failure{Error::BadInput((*pong)["torch_mismatch"].get<std::string>())};
  return t;
}

int RunBackends(bool as_json) {
  const nlohmann::json torch = TorchBuilds();
  nlohmann::json list = nlohmann::json::array();
  for (const auto& info : experiment::Backends()) {
    std::string name = info.name;
    if (name.find('<') != std::string::npos) name = name.substr(0, name.find('<')) + "inductor";  // a probe instance
    auto b = experiment::MakeBackend(name);
    experiment::Availability a = b.ok() ? (*b)->Available() : experiment::Availability{false, b.error().message};
    list.push_back({{"name", info.name},
                    {"kind", info.kind},
                    {"available", a.available},
                    {"why", a.why},
                    {"description", info.description}});
  }
  AddDynamoBackends(list);
  if (as_json) {
    std::cout << nlohmann::json{{"torch", torch}, {"backends", list}}.dump(2) << "\n";
    return 0;
  }
  std::printf("torch: parity built against %s (CUDA %s); the worker runs %s (%s)\n", torch["built_against"].get<std::string>().c_str(),
              torch["cuda"].get<std::string>().c_str(), torch["worker"].get<std::string>().c_str(),
              torch.value("worker_python", std::string("?")).c_str());
  for (const auto& b : list) {
    std::printf("%-28s %-12s %-20s %s\n", b["name"].get<std::string>().c_str(),
                b["available"].get<bool>() ? "available" : "unavailable", b["kind"].get<std::string>().c_str(),
                (b["available"].get<bool>() ? b["description"] : b["why"]).get<std::string>().c_str());
  }
  return 0;
}
}  // namespace

void set_backends_command(CLI::App& app, int& exit_code) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("backends", "List the backends and whether each can run here");
  cmd->add_flag("--json", *as_json, "print as JSON");
  cmd->callback([as_json, &exit_code] { exit_code = RunBackends(*as_json); });
}

}  // namespace parity::cli
