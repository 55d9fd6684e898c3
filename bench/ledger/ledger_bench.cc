// unisched-ledger-bench: the accounting ledger at scale (issue 4, point 8).
// Writes N ledger entries (default 10 million) through the store's writer,
// shaped like the daemon's interim charging: a cluster with a steady number
// of running jobs, each charged every 60 s for four metrics, jobs of 200
// users in 20 projects over four queues and pools lasting 10 minutes to 4
// hours. Then times GET /v1/usage's store query grouped by project and queue,
// over all time and over a one-week window whose ends are not on hour
// boundaries, and the same sum as one plain scan of the table (what a query
// would cost without the hourly rollup). Prints one JSON line.
//
// usage: unisched-ledger-bench [--entries N] [--running N] [--runs N] [--dir DIR] [--seed N]

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "unisched/store/store.h"

namespace {

using namespace unisched;
using Clock = std::chrono::steady_clock;

struct Options {
  int64_t entries = 10'000'000;
  int running = 300;  // jobs charged every interval
  int runs = 5;       // timed repetitions of each query
  std::string dir;    // where the database goes (default: a fresh temporary directory)
  unsigned seed = 42;
};

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct RunningJob {
  model::JobId id = 0;
  int user = 0;
  int queue = 0;
  int64_t ends_at_minute = 0;
};

const char* const kQueues[] = {"hpc-precision", "ai-training", "ai-inference", "agent-sandbox"};
const char* const kPools[] = {"cpu-hpc-pool", "gpu-train-pool", "inference-pool", "elastic-light-pool"};
const char* const kKinds[] = {"hpc", "ai_training", "ai_inference", "agent"};

// The charges of one interval of one job: what Controller::ChargeRunning
// writes (cpu, memory, and GPUs or an instance by pool).
void AppendInterval(std::vector<store::LedgerEntry>& out, const RunningJob& job, Timestamp from, Timestamp to) {
  const double seconds = std::chrono::duration<double>(to - from).count();
  const int q = job.queue;
  const std::string user = "user" + std::to_string(job.user);
  const std::string project = "project" + std::to_string(job.user % 20);
  const std::string node = std::string(kPools[q]) + "-node" + std::to_string(job.id % 50);
  struct Metric {
    const char* name;
    double per_second;
  };
  const Metric cpu{"cpu_core_seconds", 8}, memory{"memory_mb_seconds", 32768}, gpu{"gpu_seconds", 4},
      instance{"instance_seconds", 1}, used{"cpu_seconds_used", 6};
  const Metric metrics[] = {cpu, memory, q == 1 || q == 2 ? gpu : q == 3 ? instance : used};
  for (const Metric& m : metrics) {
    store::LedgerEntry e;
    e.job = job.id;
    e.attempt = 1;
    e.user = user;
    e.project = project;
    e.queue = kQueues[q];
    e.pool = kPools[q];
    e.workload_kind = kKinds[q];
    e.node = node;
    e.metric = m.name;
    e.quantity = m.per_second * seconds;
    e.start = from;
    e.end = to;
    e.recorded_at = to;
    e.key = std::to_string(job.id) + "/1/" + e.metric + "//" + node + "/" + std::to_string(ToUnixMillis(from));
    out.push_back(std::move(e));
  }
}

// Sums of a plain scan of every entry, grouped like the query: the cost the
// rollup avoids.
double PlainScanSeconds(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* stmt = nullptr;
  const auto t0 = Clock::now();
  sqlite3_prepare_v2(db, "SELECT project, queue, metric, SUM(quantity) FROM ledger GROUP BY 1, 2, 3", -1, &stmt,
                     nullptr);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
  }
  const double s = Seconds(Clock::now() - t0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return s;
}

struct Timing {
  double median = 0, max = 0;
  size_t rows = 0;
};

Timing TimeQuery(const store::Store& store, const store::UsageQuery& query, int runs) {
  std::vector<double> seconds;
  Timing t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    t.rows = store.QueryUsage(query).size();
    seconds.push_back(Seconds(Clock::now() - t0));
  }
  std::sort(seconds.begin(), seconds.end());
  t.median = seconds[seconds.size() / 2];
  t.max = seconds.back();
  return t;
}

int Run(const Options& o) {
  namespace fs = std::filesystem;
  std::string dir = o.dir;
  bool remove_dir = false;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "unisched-ledger-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = tmpl;
    remove_dir = true;
  }
  const std::string path = dir + "/unisched.db";
  store::StoreOptions options;
  options.path = path;
  auto opened = store::Store::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "ledger-bench: %s\n", opened.error().message.c_str());
    return 1;
  }
  std::unique_ptr<store::Store> store = std::move(*opened);

  // ---- writes: one batch per accounting interval, as the controller does ----
  std::mt19937 rng(o.seed);
  std::uniform_int_distribution<int> user_of(0, 199), queue_of(0, 3), minutes_of(10, 240);
  const Timestamp t0 = FromUnixMillis(1'780'000'000'000);  // 2026-05-28, not on an hour boundary
  std::vector<RunningJob> running;
  model::JobId next_id = 1;
  auto start_job = [&](int64_t minute) {
    return RunningJob{next_id++, user_of(rng), queue_of(rng), minute + minutes_of(rng)};
  };
  for (int i = 0; i < o.running; ++i) running.push_back(start_job(0));

  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  std::atomic<bool> failed{false};
  int64_t written = 0;
  int64_t minute = 0;
  const auto write_start = Clock::now();
  while (written < o.entries) {
    auto batch = std::make_shared<std::vector<store::LedgerEntry>>();
    const Timestamp from = t0 + std::chrono::minutes(minute), to = from + std::chrono::minutes(1);
    for (auto& job : running) {
      AppendInterval(*batch, job, from, to);
      if (job.ends_at_minute <= minute + 1) job = start_job(minute + 1);
    }
    if (static_cast<int64_t>(batch->size()) > o.entries - written) batch->resize(o.entries - written);
    written += static_cast<int64_t>(batch->size());
    ++minute;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return in_flight < 8; });  // bounded: the writer, not memory, sets the pace
      ++in_flight;
    }
    store->Write(
        [batch](store::Transaction& t) {
          for (const auto& e : *batch) {
            if (Status s = t.AppendLedger(e); !s) return s;
          }
          return Status::Ok();
        },
        [&](Status s) {
          if (!s) {
            std::fprintf(stderr, "ledger-bench: write failed: %s\n", s.error().message.c_str());
            failed = true;
          }
          std::lock_guard lock(mu);
          --in_flight;
          cv.notify_all();
        });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return in_flight == 0; });
  }
  const double write_seconds = Seconds(Clock::now() - write_start);
  if (failed) return 1;

  // ---- queries ----
  store::UsageQuery all;
  all.group_by = {"project", "queue"};
  store::UsageQuery week = all;
  const int64_t span_minutes = minute;
  // A week in the middle of the data, or all of it when it spans less; off
  // the hour on both ends, so both edges are summed from the entries.
  const int64_t week_minutes = std::min<int64_t>(7 * 24 * 60, span_minutes - 2);
  const int64_t week_from = (span_minutes - week_minutes) / 2;
  week.from = t0 + std::chrono::minutes(week_from) + std::chrono::seconds(17);
  week.to = *week.from + std::chrono::minutes(week_minutes);
  const Timing all_time = TimeQuery(*store, all, o.runs);
  const Timing windowed = TimeQuery(*store, week, o.runs);
  const double scan = PlainScanSeconds(path);
  store->Close();
  std::error_code ignored;
  const auto db_bytes = fs::file_size(path, ignored);

  std::printf(
      "{\"bench\":\"ledger\",\"entries\":%lld,\"running_jobs\":%d,\"span_hours\":%.1f,\"write_seconds\":%.1f,"
      "\"entries_per_second\":%.0f,\"db_mb\":%.0f,"
      "\"query_all_median_s\":%.3f,\"query_all_max_s\":%.3f,\"query_all_rows\":%zu,"
      "\"query_week_median_s\":%.3f,\"query_week_max_s\":%.3f,\"query_week_rows\":%zu,\"week_hours\":%.1f,"
      "\"plain_scan_s\":%.2f}\n",
      static_cast<long long>(written), o.running, span_minutes / 60.0, write_seconds, written / write_seconds,
      db_bytes / 1e6, all_time.median, all_time.max, all_time.rows, windowed.median, windowed.max, windowed.rows,
      week_minutes / 60.0, scan);
  if (remove_dir) fs::remove_all(dir, ignored);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ledger-bench: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--entries")) {
      o.entries = std::atoll(value("--entries"));
    } else if (!std::strcmp(argv[i], "--running")) {
      o.running = std::atoi(value("--running"));
    } else if (!std::strcmp(argv[i], "--runs")) {
      o.runs = std::atoi(value("--runs"));
    } else if (!std::strcmp(argv[i], "--dir")) {
      o.dir = value("--dir");
    } else if (!std::strcmp(argv[i], "--seed")) {
      o.seed = static_cast<unsigned>(std::atoi(value("--seed")));
    } else {
      std::fprintf(stderr,
                   "usage: unisched-ledger-bench [--entries N] [--running N] [--runs N] [--dir DIR] [--seed N]\n");
      return 2;
    }
  }
  if (o.entries < 1000 || o.running < 1 || o.runs < 1) {
    std::fprintf(stderr, "ledger-bench: --entries must be >= 1000, --running and --runs >= 1\n");
    return 2;
  }
  return Run(o);
}
