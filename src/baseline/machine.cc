// The facts of this machine (unisched/baseline/machine.h), from /proc and
// uname.

#include "unisched/baseline/machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace unisched::baseline {

namespace {

// The value of the first "key<spaces>: value" line of a /proc file.
std::string ProcField(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':', key.size());
    if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

}  // namespace

MachineFacts ReadMachineFacts() {
  MachineFacts facts;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) facts.hostname = host;
  facts.cpu_model = ProcField("/proc/cpuinfo", "model name");
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cpus = online > 0 ? static_cast<int>(online) : 0;
  // "MemTotal:       16384000 kB"
  const std::string total = ProcField("/proc/meminfo", "MemTotal");
  try {
    facts.memory_mb = total.empty() ? 0 : std::stoll(total) / 1024;
  } catch (const std::exception&) {
    facts.memory_mb = 0;
  }
  struct utsname names {};
  if (::uname(&names) == 0) facts.kernel = std::string(names.release) + " " + names.version;
  return facts;
}

nlohmann::json ToJson(const MachineFacts& f) {
  return {{"hostname", f.hostname},
          {"cpu_model", f.cpu_model},
          {"cpus", f.cpus},
          {"memory_mb", f.memory_mb},
          {"kernel", f.kernel}};
}

}  // namespace unisched::baseline
