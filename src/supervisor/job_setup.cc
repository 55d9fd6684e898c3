// JobSetup: see job_setup.h.

#include "supervisor/job_setup.h"

#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace unisched::supervisor {

namespace files = executor::files;

std::optional<JobSetup::Failure> JobSetup::Prepare(const files::AttemptSpec& spec, rlim_t open_files_limit,
                                                   AttemptOutput& output) {
  const executor::LaunchSpec& launch = spec.launch;
  job_spec_.argv = launch.argv;
  job_spec_.env = launch.env;
  job_spec_.work_dir = spec.work_dir;
  job_spec_.isolate = launch.isolate;
  job_spec_.chdir = launch.chdir;
  if (!launch.script.empty()) {
    if (spec.work_dir.empty()) return Failure{"a batch script needs a work directory to be written to"};
    job_spec_.script = launch.script;
    job_spec_.script_file = executor::ScriptFileName(launch.attempt, launch.task);
    job_spec_.script_path =
        (launch.isolate ? std::string(isolation::kSandboxHome) : spec.work_dir) + "/" + job_spec_.script_file;
  }
  job_spec_.open_files_limit = open_files_limit;
  if (spec.pin_cpus && !launch.cpu_set.empty()) PinTo(launch.cpu_set, output);
  if (auto failure = TakeAccount(spec)) return failure;
  if (auto failure = MakeWorkDir(spec.work_dir, job_spec_.account)) return failure;
  if (auto failure = TakeSharedStorage(spec)) return failure;
  if (auto failure = TakeSecrets(spec)) return failure;
  // A TMPDIR per job and node, as Slurm sites give with job_container/tmpfs:
  // local nodes share one machine's /tmp, where programs that name their
  // files after the host (Open MPI's session directories) would collide.
  // One the job sets itself is kept; a task that names no node (a spec
  // written by hand) gets none.
  if (!launch.isolate && !spec.work_dir.empty() && !launch.node.empty() && job_spec_.env.count("TMPDIR") == 0) {
    job_spec_.tmp_dir = executor::TmpDirPath(spec.work_dir, launch.node);
    job_spec_.env["TMPDIR"] = job_spec_.tmp_dir;
  }

  const containment::Limits& limits = launch.limits;
  if (spec.use_cgroups) {
    auto c = containment::Containment::Create(files::CgroupName(launch.job_id, launch.attempt, launch.task, ::getpid()),
                                              limits);
    if (c.ok()) {
      containment_ = std::move(c).value();
    } else {
      output.Log("cgroups unavailable, falling back to rlimits: %s", c.error().message.c_str());
      containment_ = containment::Containment::Disabled(limits);
    }
  } else {
    containment_ = containment::Containment::Disabled(limits);
  }
  return std::nullopt;
}

// Logical CPU k of the node is the k-th CPU this supervisor may run on (the
// affinity it inherits from the daemon or agent: a container's or cgroup's
// cpuset), modulo their count, so a node's ids always name CPUs it has.
void JobSetup::PinTo(const std::vector<int>& cpu_set, AttemptOutput& output) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    output.Log("not pinned: cannot read this process's CPUs: %s", std::strerror(errno));
    return;
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.empty()) return;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::string pinned;
  for (int id : cpu_set) {
    const int cpu = cpus[static_cast<size_t>(id) % cpus.size()];
    if (!CPU_ISSET(cpu, &mask)) pinned += (pinned.empty() ? "" : ",") + std::to_string(cpu);
    CPU_SET(cpu, &mask);
  }
  job_spec_.affinity = mask;
  output.Log("pinned to CPUs %s", pinned.c_str());
}

// A leased sandbox uid, the account the executor resolved, or (a non-root
// supervisor) ours.
std::optional<JobSetup::Failure> JobSetup::TakeAccount(const files::AttemptSpec& spec) {
  const executor::LaunchSpec& launch = spec.launch;
  Account& account = job_spec_.account;
  if (launch.isolate && ::geteuid() == 0) {
    // A sandboxed job runs as a uid of its own, leased for as long as the
    // attempt lasts (docs/sandboxes.md): never a tenant's shared account.
    uid_lease_ = isolation::UidLease::Acquire(
        launch.sandbox_uid_lock_dir.empty() ? "/run/unisched/sandbox-uids" : launch.sandbox_uid_lock_dir,
        static_cast<uid_t>(launch.sandbox_uid_base > 0 ? launch.sandbox_uid_base : 3'000'000),
        static_cast<uid_t>(launch.sandbox_uid_count > 0 ? launch.sandbox_uid_count : 100'000),
        static_cast<uint64_t>(launch.job_id) * 31 + static_cast<uint64_t>(launch.attempt));
    if (!uid_lease_.held()) {
      const int err = errno;
      // Its lock file could not be opened.
      return Failure{std::string("no free sandbox uid: ") + std::strerror(err), executor::IsTransientErrno(err)};
    }
    account.switch_user = true;
    account.name = "sandbox uid " + std::to_string(uid_lease_.uid());
    account.uid = uid_lease_.uid();
    // Its project's group when it has one (executor.user_accounts), so that
    // it reaches its project's directory on shared storage, and no other.
    account.gid = launch.ids && launch.ids->gid != 0 ? launch.ids->gid : uid_lease_.uid();
    job_spec_.env["HOME"] = isolation::kSandboxHome;
  } else if (spec.account) {
    // Resolved by the executor: no NSS module is loaded here (attempt_files.h).
    if (spec.account->uid == 0) return Failure{"refusing to run a job as root ('" + launch.unix_user + "')"};
    account.switch_user = true;
    account.name = launch.unix_user;
    account.uid = spec.account->uid;
    account.gid = spec.account->gid;
    account.groups.assign(spec.account->groups.begin(), spec.account->groups.end());
  } else if (::geteuid() == 0) {
    // The executor resolves every account it does not lease; without one a
    // root supervisor would run the job as root.
    return Failure{"refusing to run a job as root: the spec names no account for '" + launch.unix_user + "'"};
  } else {
    account.name = launch.unix_user;  // the executor found it is ours: no switch
  }
  return std::nullopt;
}

// The shared file systems of the job's pool (docs/data.md): each must be a
// directory on this node; the job's project directory is made when missing
// (its project's group, 2770: its members' jobs share it, no one else's
// enter it); UNISCHED_SHARED_<NAME> names where the job finds its files; and
// what the job sees elsewhere than at the node's path, or read-only, or
// (isolated) writable under its read-only root, is bound for the child.
std::optional<JobSetup::Failure> JobSetup::TakeSharedStorage(const files::AttemptSpec& spec) {
  const executor::LaunchSpec& launch = spec.launch;
  const bool root = ::geteuid() == 0;
  for (const executor::SharedMount& fs : launch.shared) {
    struct stat st {};
    const bool found = ::stat(fs.path.c_str(), &st) == 0;
    if (!found || !S_ISDIR(st.st_mode)) {
      return Failure{"shared file system " + fs.path + " is not on node '" + launch.node +
                     "': " + (found ? std::string("not a directory") : std::string(std::strerror(errno))) +
                     " (storage.shared[].path must exist on every node of the pool)"};
    }
    if (!fs.project.empty() && !fs.read_only) {
      const std::string dir = fs.path + "/" + fs.project;
      // The project's group: its allocated one, else the job's own.
      const gid_t group = launch.ids && launch.ids->gid != 0 ? launch.ids->gid : job_spec_.account.gid;
      if (::mkdir(dir.c_str(), 0700) == 0) {
        if (root && (::chown(dir.c_str(), 0, group) != 0 || ::chmod(dir.c_str(), 02770) != 0)) {
          return Failure{"cannot give the project directory " + dir + " to group " + std::to_string(group) + ": " +
                         std::strerror(errno)};
        }
        if (!root) ::chmod(dir.c_str(), 0770);
      } else if (errno != EEXIST) {
        return Failure{"cannot make the project directory " + dir + ": " + std::strerror(errno)};
      }
    }
    job_spec_.env[fs.variable] = fs.project.empty() ? fs.mount : fs.mount + "/" + fs.project;
    if (fs.mount != fs.path || fs.read_only || launch.isolate) {
      if (!root) {
        return Failure{"shared file system " + fs.path + " is seen at " + fs.mount +
                       (fs.read_only ? " read-only" : "") +
                       ", which takes a bind mount, which takes a supervisor running as root"};
      }
      if (::stat(fs.mount.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return Failure{"shared file system " + fs.path + " is to be seen at " + fs.mount +
                       ", which is not a directory on node '" + launch.node +
                       "' (create it there: storage.shared[].mount must exist on the nodes)"};
      }
      job_spec_.binds.push_back({fs.path, fs.mount, fs.read_only});
    }
  }
  return std::nullopt;
}

// The job's secrets (docs/secrets.md): those asked for as variables into
// its environment, the rest as files for the child to write into a tmpfs
// of the job's own (JobSpec::secret_files), which takes root.
std::optional<JobSetup::Failure> JobSetup::TakeSecrets(const files::AttemptSpec& spec) {
  const executor::LaunchSpec& launch = spec.launch;
  size_t bytes = 0;
  for (const auto& secret : launch.secrets) {
    if (!secret.env.empty()) {
      job_spec_.env[secret.env] = secret.value;
      secret_env_names_.push_back(secret.env);
      continue;
    }
    // A name the API checked (model::CheckSecretName); checked again, as
    // it becomes a file name here.
    if (secret.name.empty() || secret.name.find('/') != std::string::npos || secret.name[0] == '.') {
      return Failure{"a secret's name '" + secret.name + "' cannot be a file name"};
    }
    job_spec_.secret_files.emplace_back(secret.name, secret.value);
    bytes += secret.value.size();
  }
  if (job_spec_.secret_files.empty()) return std::nullopt;
  if (spec.work_dir.empty()) return Failure{"secret files need a work directory to be mounted in"};
  if (::geteuid() != 0 || !job_spec_.account.switch_user) {
    return Failure{
        "secrets as files need a supervisor running as root (a private tmpfs is mounted for them); ask "
        "for them as variables ({\"name\": ..., \"env\": ...}) with a daemon that is not root"};
  }
  const std::string dir_name = executor::kSecretsDirName;
  job_spec_.secrets_dir = (launch.isolate ? std::string(isolation::kSandboxHome) : spec.work_dir) + "/" + dir_name;
  // Room for the files with a page each to spare, and inodes for them only.
  const size_t size = bytes + (job_spec_.secret_files.size() + 4) * 4096;
  job_spec_.secrets_mount_options = "mode=0500,uid=" + std::to_string(job_spec_.account.uid) +
                                    ",gid=" + std::to_string(job_spec_.account.gid) + ",size=" + std::to_string(size) +
                                    ",nr_inodes=" + std::to_string(job_spec_.secret_files.size() + 4);
  job_spec_.env["UNISCHED_SECRETS_DIR"] = job_spec_.secrets_dir;
  return std::nullopt;
}

void JobSetup::ForgetSecrets() {
  for (auto& [name, content] : job_spec_.secret_files) ::explicit_bzero(content.data(), content.size());
  job_spec_.secret_files.clear();
  for (const std::string& name : secret_env_names_) {
    if (auto it = job_spec_.env.find(name); it != job_spec_.env.end()) {
      ::explicit_bzero(it->second.data(), it->second.size());
      job_spec_.env.erase(it);
    }
  }
  secret_env_names_.clear();
}

// <work_root>/<job>, shared by the job's attempts and private to its
// account (0700 by the umask; chmod for one made by someone else). The
// executor made work_root.
std::optional<JobSetup::Failure> JobSetup::MakeWorkDir(const std::string& work, const Account& account) {
  if (work.empty()) return std::nullopt;
  bool created = true;
  if (::mkdir(work.c_str(), 0700) != 0) {
    if (errno != EEXIST) {
      const int err = errno;
      return Failure{"cannot create " + work + ": " + std::strerror(err), executor::IsTransientErrno(err)};
    }
    created = false;
  }
  if (account.switch_user && ::chown(work.c_str(), account.uid, account.gid) != 0) {
    return Failure{"cannot give " + work + " to '" + account.name + "': " + std::strerror(errno)};
  }
  if (!created && ::chmod(work.c_str(), 0700) != 0) {
    return Failure{"cannot chmod " + work + ": " + std::strerror(errno)};
  }
  return std::nullopt;
}

}  // namespace unisched::supervisor
