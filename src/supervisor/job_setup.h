#pragma once
// What a job runs as and in (account, work directory, containment), made from its spec before the fork.
// Apart because it decides the job's privileges: never root, no NSS lookup.

#include <sys/resource.h>

#include <optional>
#include <string>
#include <vector>

#include "executor/attempt_files.h"
#include "supervisor/attempt_output.h"
#include "supervisor/job_launch.h"
#include "unisched/containment/containment.h"
#include "unisched/isolation/isolation.h"

namespace unisched::supervisor {

class JobSetup {
 public:
  // Why the job cannot start; transient: a shortage worth trying again.
  struct Failure {
    std::string reason;
    bool transient = false;
  };

  // The JobSpec for `spec` (the job's soft limit of open files:
  // JobSpec::open_files_limit), its account, work directory and containment.
  // Diagnostics (a fallback from cgroups to rlimits) go to `output`.
  std::optional<Failure> Prepare(const executor::files::AttemptSpec& spec, rlim_t open_files_limit,
                                 AttemptOutput& output);

  const JobSpec& job_spec() const { return job_spec_; }
  containment::Containment& containment() { return containment_; }
  // Once the attempt's result is written: its sandbox uid is free again.
  void ReleaseUid() { uid_lease_ = isolation::UidLease(); }
  // Once the job started: the secret files' contents are wiped from our
  // memory (the job's tmpfs holds them now).
  void ForgetSecrets();

 private:
  std::optional<Failure> TakeAccount(const executor::files::AttemptSpec& spec);
  std::optional<Failure> TakeSharedStorage(const executor::files::AttemptSpec& spec);
  std::optional<Failure> TakeSecrets(const executor::files::AttemptSpec& spec);
  std::optional<Failure> MakeWorkDir(const std::string& work, const Account& account);
  // JobSpec::affinity for the node's logical CPUs `cpu_set`.
  void PinTo(const std::vector<int>& cpu_set, AttemptOutput& output);

  JobSpec job_spec_;
  containment::Containment containment_;
  std::vector<std::string> secret_env_names_;  // variables holding a secret, wiped by ForgetSecrets
  isolation::UidLease uid_lease_;              // sandboxed jobs: their own uid, held until the attempt ends
};

}  // namespace unisched::supervisor
