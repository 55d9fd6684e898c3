#include "cli/step_command.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/session.h"
#include "unisched/client/http_client.h"
#include "unisched/model/words.h"

namespace unisched::cli {

namespace {

using nlohmann::json;

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::optional<std::string>(v) : std::nullopt;
}

int Usage(const std::string& message) {
  std::cerr << "error: " << message << "\n" << kStepUsage << "\n";
  return 2;
}

}  // namespace

int RunStep(const std::vector<std::string>& words) {
  json request = json::object();
  std::optional<std::string> job = Env("UNISCHED_JOB_ID");
  std::vector<std::string> command;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    auto value = [&]() -> std::optional<std::string> {
      return i + 1 < words.size() ? std::optional<std::string>(words[++i]) : std::nullopt;
    };
    auto number = [&](const char* field) -> std::optional<int> {
      auto v = value();
      if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos || v->size() > 9) return {};
      request[field] = std::stoi(*v);
      return std::stoi(*v);
    };
    if (w == "--") {
      command.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
      break;
    }
    if (w == "--help" || w == "-h") {
      std::cout << kStepUsage << "\n";
      return 0;
    }
    if (w == "--nodes" || w == "-N") {
      if (!number("nodes")) return Usage(w + " needs a positive number");
    } else if (w == "--tasks-per-node") {
      if (!number("tasks_per_node")) return Usage(w + " needs a positive number");
    } else if (w == "--nodelist" || w == "-w") {
      auto v = value();
      if (!v || model::Split(*v, ',').empty()) return Usage(w + " needs node names separated by commas");
      request["node_names"] = model::Split(*v, ',');
    } else if (w == "--job") {
      job = value();
      if (!job) return Usage("--job needs a job ID");
    } else if (w == "--rsh") {
      // As ssh runs a remote command: the words joined, by the node's shell.
      auto node = value();
      if (!node || i + 1 >= words.size()) return Usage("--rsh needs a node and a command");
      std::string joined;
      for (size_t k = i + 1; k < words.size(); ++k) joined += (joined.empty() ? "" : " ") + words[k];
      request["node_names"] = json::array({*node});
      request["tasks_per_node"] = 1;
      command = {"/bin/sh", "-c", joined};
      break;
    } else {
      return Usage("unknown flag or missing '--' before the command: '" + w + "'");
    }
  }
  if (command.empty()) return Usage("no command: give it after '--'");
  if (!job) return Usage("no job: run it inside a job (UNISCHED_JOB_ID), or pass --job ID");
  request["command"] = command;

  const std::string url = Env("UNISCHED_URL").value_or(kDefaultUrl);
  const std::string token = Env("UNISCHED_JOB_TOKEN").value_or(Env("UNISCHED_TOKEN").value_or(""));
  if (token.empty()) return Usage("no token: UNISCHED_JOB_TOKEN (set in every job) or UNISCHED_TOKEN");
  auto endpoint = client::ParseUrl(url);
  if (!endpoint.ok()) return Usage("daemon URL '" + url + "': " + endpoint.error().message);
  client::TlsOptions tls;
  tls.enabled = endpoint->tls;
  if (auto ca = Env("UNISCHED_CA_FILE")) tls.ca_file = *ca;
  Session session({url, token}, endpoint->host, endpoint->port, std::move(tls));

  const std::string base = "/v1/jobs/" + *job + "/steps";
  auto started = session.CallJson("POST", base, request.dump());
  if (!started) return 1;
  const int step = started->value("step", 0);
  const size_t ranks = started->value("nodes", json::array()).size();
  // Until every rank has ended: short waits first (most steps are short),
  // then at most half a second between looks.
  json view = *started;
  auto wait = std::chrono::milliseconds(5);
  while (view.value("state", "") == "RUNNING") {
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(500));
    auto now = session.CallJson("GET", base + "/" + std::to_string(step));
    if (!now) return 1;
    view = std::move(*now);
  }
  for (size_t rank = 0; rank < ranks; ++rank) {
    for (const char* stream : {"stdout", "stderr"}) {
      auto out = session.Call("GET", "/v1/jobs/" + *job + "/log?step=" + std::to_string(step) +
                                         "&rank=" + std::to_string(rank) + "&stream=" + stream);
      if (!out) return 1;
      (std::string_view(stream) == "stdout" ? std::cout : std::cerr) << out->body;
    }
  }
  std::cout.flush();
  if (view.value("state", "") != "COMPLETED") {
    std::cerr << "unisched step: step " << step << " of job " << *job << " ended " << view.value("state", "") << ": "
              << view.value("reason", "") << "\n";
  }
  if (view.contains("exit_code") && view["exit_code"].is_number_integer()) return view["exit_code"].get<int>();
  return view.value("state", "") == "COMPLETED" ? 0 : 1;
}

}  // namespace unisched::cli
