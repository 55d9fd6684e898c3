#pragma once
// Fairshare (docs/policy/fairshare.md): usage decayed with a half-life, and
// the factor F = 2^(-U/S) of Slurm's classic algorithm, on two levels
// (projects, then users within a project).
//
// Decay. Usage u charged at time t0 weighs u * 2^(-(t - t0)/h) at time t, h
// the half-life: each h it loses half its weight. This is exponential decay
// with rate ln 2 / h, so the whole sum can be decayed in one step:
//   U(t2) = U(t1) * 2^(-(t2 - t1)/h) + (charges in (t1, t2], each decayed).
// That is why DecayTo multiplies every total by one factor and needs no
// history.
//
// Factor. With s_p the project's share of all project shares, s_u the user's
// share within the project, S = s_p * s_u the user's normalized share, and
//   U_p = usage of the project / usage of all projects,
//   U_u = usage of the user / usage of all projects,
//   U   = U_u + (U_p - U_u) * s_u
// (Slurm's classic effective usage: the user's own usage, pulled toward the
// project's in proportion to the user's share of the project, so one
// user's heavy use weighs on the others of the project, and a project's only
// user has U = U_p), the factor is
//   F = 2^(-U / S).
// F = 1 without usage, 0.5 when usage matches the share exactly, -> 0 when
// usage far exceeds it.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "unisched/common/time.h"
#include "unisched/model/cluster.h"

namespace unisched::policy {

class DecayedUsage {
 public:
  explicit DecayedUsage(double half_life_seconds);

  // Decays every total to `now` (never backwards).
  void DecayTo(Timestamp now);
  // Charges `amount` (e.g. CPU-seconds) at `now` (decays first).
  void Charge(const std::string& project, const std::string& user, double amount, Timestamp now);

  double Project(const std::string& project) const;
  double User(const std::string& project, const std::string& user) const;
  double Total() const { return total_; }
  // Users with usage in the project.
  std::vector<std::string> UsersOf(const std::string& project) const;
  Timestamp AsOf() const { return as_of_; }

  // For persistence: every (project, user) total as of AsOf().
  struct Entry {
    std::string project;
    std::string user;
    double usage = 0;
  };
  std::vector<Entry> Entries() const;
  void Restore(const std::vector<Entry>& entries, Timestamp as_of);

 private:
  double half_life_seconds_;
  Timestamp as_of_{};
  double total_ = 0;
  std::map<std::string, double> projects_;
  std::map<std::pair<std::string, std::string>, double> users_;
};

// F for (project, user) given the shares in `projects` (unlisted projects and
// users have share 1).
double FairshareFactor(const DecayedUsage& usage, const std::vector<model::ProjectPolicy>& projects,
                       const std::string& project, const std::string& user);

// The charge rate of a running job per second: cpus + gpu_weight * gpus,
// over all its nodes (CPU-second equivalents).
double ChargeRate(const model::ResourceRequest& request, double gpu_weight);

}  // namespace unisched::policy
