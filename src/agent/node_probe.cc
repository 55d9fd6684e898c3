// Node probes (agent/node_probe.h) and nvidia-smi's output
// (unisched/agent/agent.h).

#include "agent/node_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "unisched/agent/agent.h"

namespace unisched::agent {

std::vector<model::GpuDevice> ParseNvidiaSmi(const std::string& csv) {
  std::vector<model::GpuDevice> gpus;
  std::istringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream fields(line);
    while (std::getline(fields, cell, ',')) {
      cell.erase(0, cell.find_first_not_of(" \t"));
      cell.erase(cell.find_last_not_of(" \t\r") + 1);
      cells.push_back(cell);
    }
    if (cells.size() < 3) continue;
    model::GpuDevice gpu;
    try {
      gpu.index = std::stoi(cells[0]);
      gpu.memory_gb = static_cast<int>((std::stoll(cells[2]) + 512) / 1024);  // MiB -> GiB, rounded
    } catch (const std::exception&) {
      continue;
    }
    std::istringstream words(cells[1]);
    std::string word;
    while (words >> word) {
      std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
      if (word != "nvidia") break;
    }
    gpu.model = word;
    gpus.push_back(gpu);
  }
  return gpus;
}

// The address this machine reaches `url`'s host from: the local end of a
// UDP socket connected there (connect sends nothing over UDP). What the
// daemon's other nodes would reach this one on, on a flat network.
std::string DetectAddress(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("/,"));
  std::string host = rest, port = "80";
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    host = rest.substr(1, rest.find(']') - 1);
    if (const size_t colon = rest.find("]:"); colon != std::string::npos) port = rest.substr(colon + 2);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return {};
  std::string address;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  char text[INET6_ADDRSTRLEN] = {};
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    const void* raw = local.ss_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof text)) address = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

int64_t DetectMemoryMb() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb / 1024;
  }
  return 0;
}

std::vector<model::GpuDevice> DetectGpus() {
  FILE* p = ::popen("nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>/dev/null", "r");
  if (!p) return {};
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  if (::pclose(p) != 0) return {};
  return ParseNvidiaSmi(out);
}

std::pair<bool, std::string> RunHealthCheck(const executor::HealthCheck& check) {
  const pid_t pid = ::fork();
  if (pid < 0) return {false, std::string("cannot fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    std::vector<char*> args;
    for (const auto& a : check.command) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(check.timeout_seconds);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return {false, check.command[0] + " did not finish within " + std::to_string(check.timeout_seconds) + " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {true, ""};
  if (WIFEXITED(status)) return {false, check.command[0] + " exited " + std::to_string(WEXITSTATUS(status))};
  return {false, check.command[0] + " was killed by signal " + std::to_string(WTERMSIG(status))};
}

}  // namespace unisched::agent
