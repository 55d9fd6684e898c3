// SandboxInstances (sandbox_instances.h): starting instances on this host and sweeping a dead run's.
// Apart from the manager, which decides what to start.

#include "daemon/sandbox_instances.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>

#include "unisched/isolation/isolation.h"

namespace unisched::daemon {

SandboxInstances::SandboxInstances(const config::Config& config, std::string sandboxes_dir, std::string init_path)
    : config_(config),
      sandboxes_dir_(std::move(sandboxes_dir)),
      init_path_(std::move(init_path)),
      name_prefix_("sb" + std::to_string(::getpid()) + "-") {}

void SandboxInstances::Prepare() {
  available_ = ::geteuid() == 0;
  if (!available_) {
    spdlog::warn("sandboxes need root (namespaces, cgroups, a uid per instance): POST /v1/sandboxes answers 503");
  }
  std::error_code ec;
  std::filesystem::create_directories(sandboxes_dir_, ec);
  ::chmod(sandboxes_dir_.c_str(), 0711);
}

containment::Limits SandboxInstances::Caps(const service::SandboxLimits& limits) const {
  return {limits.memory_mb << 20, static_cast<int>(limits.cpus * 1000), config_.sandboxes.pids_max};
}

Result<StartedInstance> SandboxInstances::Start(const ImageVersion& image, const std::string& queue,
                                                const service::SandboxLimits& limits) {
  const int64_t number = next_instance_++;
  sandbox::InstanceSpec spec;
  spec.name = name_prefix_ + std::to_string(number);
  spec.init_path = init_path_;
  spec.work_dir = sandboxes_dir_ + "/" + spec.name;
  spec.rootfs = image.rootfs;
  spec.binds = image.binds;
  spec.limits = Caps(limits);
  spec.uid =
      isolation::UidLease::Acquire(config_.sandboxes.uid_lock_dir, static_cast<uid_t>(config_.sandboxes.uid_base),
                                   static_cast<uid_t>(config_.sandboxes.uid_count),
                                   static_cast<uint64_t>(::getpid()) * 7919 + static_cast<uint64_t>(number));
  if (!spec.uid.held()) {
    return Error::Unavailable("no free sandbox uid in [" + std::to_string(config_.sandboxes.uid_base) + ", +" +
                              std::to_string(config_.sandboxes.uid_count) + ") (" + std::strerror(errno) + ")");
  }
  auto instance = sandbox::Instance::Start(std::move(spec));
  if (!instance.ok()) return instance.error();
  StartedInstance started;
  started.instance = std::shared_ptr<sandbox::Instance>(std::move(instance).value());
  started.queue = queue;
  started.limits = limits;
  return started;
}

void SandboxInstances::RemoveLost(const std::string& instance_name, const std::string& work_dir) const {
  const std::string& cgroup = instance_name;
  if (!cgroup.empty() && available_) {
    if (auto leftover = containment::Containment::Find(cgroup)) (void)leftover->KillAllAndDestroy();
  }
  sandbox::RemoveTree(work_dir);
}

void SandboxInstances::RemoveLeftovers() const {
  // Every active sandbox of the store was ended before: what is left in our
  // sandboxes directory is a dead run's (warm instances, a start that never
  // committed).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sandboxes_dir_, ec)) {
    sandbox::RemoveTree(entry.path().string());
  }
  if (!available_) return;
  // Their cgroups, named sb<daemon pid>-<n>, when that daemon is gone (the
  // groups of a live daemon on the same host are its own).
  std::set<std::string> dead;
  for (const auto& hierarchy : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    for (const auto& group : std::filesystem::directory_iterator(hierarchy.path() / "unisched", ec)) {
      const std::string name = group.path().filename().string();
      const size_t dash = name.find('-');
      if (name.rfind("sb", 0) != 0 || dash == std::string::npos || dash == 2) continue;
      const std::string pid = name.substr(2, dash - 2);
      if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
      if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) dead.insert(name);
    }
  }
  for (const std::string& name : dead) {
    auto leftover = containment::Containment::Find(name);
    if (!leftover) continue;
    if (Status removed = leftover->KillAllAndDestroy(); !removed) {
      spdlog::warn("sandbox leftovers: {}", removed.error().message);
    }
  }
  if (!dead.empty()) spdlog::info("removed the cgroups of {} sandbox instances of a stopped daemon", dead.size());
}

}  // namespace unisched::daemon
