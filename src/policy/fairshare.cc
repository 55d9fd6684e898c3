// Decayed usage and the two-level fairshare factor (formulas derived in
// fairshare.h and docs/policy/fairshare.md).

#include "unisched/policy/fairshare.h"

#include <algorithm>
#include <cmath>

namespace unisched::policy {

namespace {

void DecayTotals(double factor, double& total, std::map<std::string, double>& projects,
                 std::map<std::pair<std::string, std::string>, double>& users) {
  total *= factor;
  for (auto& [_, u] : projects) u *= factor;
  for (auto& [_, u] : users) u *= factor;
}

}  // namespace

DecayedUsage::DecayedUsage(double half_life_seconds) : half_life_seconds_(half_life_seconds) {}

void DecayedUsage::DecayTo(Timestamp now) {
  if (as_of_ == Timestamp{}) {
    as_of_ = now;
    return;
  }
  if (now <= as_of_) return;
  const double elapsed = std::chrono::duration<double>(now - as_of_).count();
  // 2^(-elapsed/h): the weight left after `elapsed` at half-life h.
  const double factor = half_life_seconds_ > 0 ? std::exp2(-elapsed / half_life_seconds_) : 0.0;
  DecayTotals(factor, total_, projects_, users_);
  as_of_ = now;
}

void DecayedUsage::Charge(const std::string& project, const std::string& user, double amount, Timestamp now) {
  DecayTo(now);
  if (amount <= 0) return;
  total_ += amount;
  projects_[project] += amount;
  users_[{project, user}] += amount;
}

double DecayedUsage::Project(const std::string& project) const {
  auto it = projects_.find(project);
  return it == projects_.end() ? 0 : it->second;
}

double DecayedUsage::User(const std::string& project, const std::string& user) const {
  auto it = users_.find({project, user});
  return it == users_.end() ? 0 : it->second;
}

std::vector<std::string> DecayedUsage::UsersOf(const std::string& project) const {
  std::vector<std::string> out;
  for (auto it = users_.lower_bound({project, ""}); it != users_.end() && it->first.first == project; ++it) {
    if (it->second > 0) out.push_back(it->first.second);
  }
  return out;
}

std::vector<DecayedUsage::Entry> DecayedUsage::Entries() const {
  std::vector<Entry> out;
  for (const auto& [key, usage] : users_) out.push_back({key.first, key.second, usage});
  return out;
}

void DecayedUsage::Restore(const std::vector<Entry>& entries, Timestamp as_of) {
  total_ = 0;
  projects_.clear();
  users_.clear();
  for (const auto& e : entries) {
    total_ += e.usage;
    projects_[e.project] += e.usage;
    users_[{e.project, e.user}] += e.usage;
  }
  as_of_ = as_of;
}

double FairshareFactor(const DecayedUsage& usage, const std::vector<model::ProjectPolicy>& projects,
                       const std::string& project, const std::string& user) {
  // Normalized project share s_p = shares / sum of all project shares. A
  // project missing from the config has share 1 and counts in the sum.
  double all_shares = 0;
  double project_shares = 1;
  const model::ProjectPolicy* policy = nullptr;
  bool listed = false;
  for (const auto& p : projects) {
    all_shares += p.shares;
    if (p.name == project) {
      project_shares = p.shares;
      policy = &p;
      listed = true;
    }
  }
  if (!listed) all_shares += project_shares;
  const double s_p = all_shares > 0 ? project_shares / all_shares : 1;

  // User share within the project, s_u = the user's shares / the shares of
  // the project's users: those listed in user_shares, plus 1 for every
  // unlisted user with usage there and for the asking user if unlisted.
  // Without a list every active user is equal.
  auto shares_of = [policy](const std::string& name) {
    if (policy) {
      auto it = policy->user_shares.find(name);
      if (it != policy->user_shares.end()) return it->second;
    }
    return 1.0;
  };
  double users_total = 0;
  if (policy) {
    for (const auto& [name, shares] : policy->user_shares) users_total += shares;
  }
  bool asking_counted = policy && policy->user_shares.count(user) > 0;
  for (const auto& name : usage.UsersOf(project)) {
    if (policy && policy->user_shares.count(name)) continue;
    users_total += 1;
    if (name == user) asking_counted = true;
  }
  if (!asking_counted) users_total += 1;
  const double s_u = users_total > 0 ? shares_of(user) / users_total : 1;

  const double total = usage.Total();
  if (total <= 0) return 1.0;
  const double project_usage = usage.Project(project);
  const double u_p = project_usage / total;
  // The user's own usage on the same scale as U_p (a part of all usage, not
  // of the project's). Slurm's classic effective usage,
  //   U_E = U_Achild + (U_Eparent - U_Achild) * S_child / S_all_siblings,
  // with the project as the parent (its effective usage is its actual one:
  // projects are the first tier): a project's only user has U = U_p.
  const double u_own = usage.User(project, user) / total;
  const double u = u_own + (u_p - u_own) * s_u;
  const double s = s_p * s_u;
  return std::exp2(-std::max(0.0, u) / std::max(s, 1e-9));
}

double ChargeRate(const model::ResourceRequest& request, double gpu_weight) {
  return static_cast<double>(request.nodes) * (request.cpus + gpu_weight * request.gpus);
}

}  // namespace unisched::policy
