#pragma once
// Typed configuration and its loader. YAML is parsed in src/config only; every
// other module sees these structs. Loading validates everything and reports
// every error with its key path, e.g.
//   queues[1].policy.max_concurrency: must be > 0

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "unisched/auth/jwt.h"
#include "unisched/model/cluster.h"

namespace unisched::config {

struct ServerSettings {
  std::string listen = "127.0.0.1:8642";  // HOST:PORT; port 0 picks a free port
  std::string state_dir = "/var/lib/unisched";
  int http_threads = 2;
  int64_t max_body_bytes = 1 << 20;     // 1 MiB, the contract's limit
  int header_timeout_seconds = 10;      // to receive a request's headers
  int body_timeout_seconds = 30;        // to receive its body
  int idle_timeout_seconds = 60;        // keep-alive idle time between requests
  double scheduler_tick_seconds = 1.0;  // periodic cycle besides event wake-ups
  bool metrics_require_token = false;
  // Connections open at once, in total and from one client address; beyond,
  // a new connection is answered 503 and closed (0: no per-client cap). The
  // total is also held under the open-file limit minus reserved_descriptors,
  // the descriptors kept for launches, the store and agents.
  int max_connections = 4096;
  int max_connections_per_client = 256;
  int reserved_descriptors = 512;
  // HTTPS when cert_file is set (docs/access.md, "TLS"); reloaded on SIGHUP.
  struct Tls {
    std::string cert_file;       // PEM chain, the server's certificate first
    std::string key_file;        // PEM private key
    std::string client_ca_file;  // verifies client certificates (agents' mTLS)
    // Node tokens work only over a connection with a client certificate
    // verified by client_ca_file: an agent needs both.
    bool agents_need_client_cert = false;
  } tls;
  // Daemon replicas sharing one PostgreSQL database (docs/replicas.md): on
  // when the config has a server.replica section. One replica leads through
  // the store's lease; the others stand by and forward API calls to it.
  struct Replica {
    bool enabled = false;
    std::string name;           // unique per replica; default: the host name
    std::string advertise_url;  // how the other replicas reach this one; default: the listen address
    int lease_seconds = 10;     // a leader that cannot renew for this long is replaced; renewed every third
    std::string ca_file;        // verifies an https:// leader when forwarding (default: the system's CAs)
  } replica;
};

// The PostgreSQL store (docs/store.md#postgresql). The password never sits
// in the config: it is read from password_file or the environment variable
// password_env when the daemon starts.
struct PostgresSettings {
  std::string conninfo;       // a libpq connection string or postgresql:// URI
  std::string password_file;  // a file holding the password (trailing newline ignored)
  std::string password_env;   // or an environment variable holding it
};

struct StoreSettings {
  std::string backend = "sqlite";             // sqlite | postgresql
  PostgresSettings postgresql;                // with backend: postgresql
  std::string synchronous = "full";           // full | normal | off (SQLite PRAGMA synchronous)
  int group_commit_max_batch = 1024;          // writes per transaction at most
  int job_retention_days = 30;                // finished job records older than this are deleted
  int audit_retention_days = 365;             // audit records older than this are deleted
  int64_t audit_max_rows = 1'000'000;         // the oldest audit records beyond this many are deleted
  int64_t max_log_bytes = 10 << 20;           // per stream per attempt; output beyond is dropped
  int accounting_interval_seconds = 60;       // running jobs are charged to the ledger this often
  int storage_sample_interval_seconds = 300;  // storage GB-hours sampled this often; 0: never
  int reconcile_interval_seconds = 3600;      // the ledger reconciled this often; 0: only on request
  // The key secrets are sealed with (docs/secrets.md): a 0600 file of 64 hex
  // digits, made at first start when missing. Empty: <state dir>/secrets.key.
  // Replicas of one store need copies of the same file.
  std::string secrets_key_file;
};

// One Unix account per unisched user (docs/accounts.md): a user without a
// configured unix_user gets a uid of its own from [uid_min, uid_max], and
// each project a group from [gid_min, gid_max], allocated once in the store.
// Off while uid_max is 0: such users' jobs then share default_unix_user.
struct UserAccountSettings {
  int64_t uid_min = 0;
  int64_t uid_max = 0;
  int64_t gid_min = 0;
  int64_t gid_max = 0;
  bool enabled() const { return uid_max > 0; }
};

struct ExecutorSettings {
  // The bootstrap admin's jobs, and (user_accounts off) every user's
  // without a unix_user, run as this.
  std::string default_unix_user = "unisched-job";
  UserAccountSettings user_accounts;
  int kill_grace_seconds = 10;  // SIGTERM .. SIGKILL on cancel and timeout
  bool use_cgroups = true;      // cgroup v1 groups where the machine has them
  int pids_limit = 4096;        // per job
  std::string supervisor_path;  // empty: unisched-supervisor beside the binary
  std::string runtime_dir;      // attempts' control files; empty: a tmpfs, else <state_dir>/runs
  // Shared storage every node mounts at this path: jobs' relative output
  // file patterns (Slurm's -o/-e) land under it. Empty: only absolute ones.
  std::string output_dir;
  // A finished job's work directory that is not empty is removed this long
  // after the job ended (an empty one at once); 0 keeps it as long as the
  // job's record (store.job_retention_days), which it must be shorter than.
  // Left out: WorkDirRetentionHours below.
  std::optional<double> work_dir_retention_hours;
  // Pin each task of the local nodes to its CPU set (docs/execution.md):
  // only where the local nodes' CPUs are the machine's own, not shared by
  // several local nodes.
  bool pin_cpus = false;
};

// A project of the file. Its policy keys become a model::ProjectPolicy in
// cluster.projects when the file loads (every project gets one).
struct ProjectSpec {
  std::string name;
  std::string description;
  double shares = 1;                          // fair share relative to the other projects
  std::map<std::string, double> user_shares;  // users within the project; unlisted: 1
  model::ResourceLimits quota;                // over every queue
  model::Budget budget{};                     // GPU-/CPU-hours per period
  std::vector<std::string> storage_paths{};   // absolute directories charged as storage_gb_hours
};

struct UserSpec {
  std::string name;
  std::string role = "user";  // platform-admin | queue-admin | user
  std::vector<std::string> projects;
  std::vector<std::string> queues;  // for queue-admin
  std::string unix_user;            // empty: executor.default_unix_user
};

// Node agents and node health (docs/agents.md).
struct HealthSettings {
  int heartbeat_interval_seconds = 5;   // agents heartbeat this often
  int heartbeat_timeout_seconds = 30;   // an agent node silent this long is down; its jobs NODE_FAIL
  int black_hole_failures = 0;          // a node where this many jobs fail ... (0: off)
  int black_hole_window_seconds = 300;  // ... within this long is drained; 0 failures: never
};

// Alerts (docs/alerts.md): rules evaluated by the daemon, delivered to a
// webhook, the log, GET /v1/alerts and unisched_alerts_firing.
struct AlertRule {
  std::string name;  // unique; the alert's name
  std::string kind;  // node_down | node_drained_automatically | pending_age | ledger_discrepancy | store_errors
  std::string severity = "warning";  // info | warning | critical
  std::string queue;                 // pending_age: this queue only (empty: each queue)
  int threshold_seconds = 3600;      // pending_age: a job pending longer than this fires
};
struct WebhookSettings {
  std::string url;          // http://host:port/path; empty: no webhook
  int timeout_seconds = 5;  // per delivery attempt
  int retries = 3;          // further attempts after a failure, 1 s, 2 s, 4 s ... apart
  std::string ca_file;      // an https:// receiver's certificate is checked against it (empty: the system's CAs)
};
struct AlertSettings {
  WebhookSettings webhook;
  std::vector<AlertRule> rules;
};

// A runtime environment of sandboxes (docs/sandboxes.md): an image version
// is a rootfs directory, or the host's root (rootfs empty), plus read-only
// binds. `python:3.11-v3` names image python, version 3.11-v3.
struct ImageSpec {
  std::string name;
  std::string version = "1";
  std::string rootfs;                // empty: the host profile (read-only host root)
  std::vector<std::string> binds{};  // "HOST_PATH:PATH_INSIDE", read-only
  int warm = 0;                      // pre-started idle instances kept ready
};

// A shared file system (docs/data.md): a directory every node of its pools
// has at `path` (a parallel file system's mount, NFS, ...), seen by jobs at
// `mount`, read-write or read-only. With project_dirs each project has
// <path>/<project>, group-owned by the project's group (mode 2770), and its
// jobs find theirs in UNISCHED_SHARED_<NAME>.
struct SharedFileSystem {
  std::string name;   // plain name; the variable is UNISCHED_SHARED_<NAME upper-cased, '-' as '_'>
  std::string path;   // on the nodes, absolute
  std::string mount;  // inside jobs, absolute; empty: path
  bool read_only = false;
  std::vector<std::string> pools{};  // empty: every pool
  bool project_dirs = true;
  // Its project directories measured and charged as storage_gb_hours (a
  // walk of each tree, like du -s: on a file system of many millions of
  // files a site may rather take its quota tool's figures).
  bool charge_storage = true;
  std::string tier = "hot";  // the storage tier its bytes are charged in (storage.tiers)
};

// Who may stage from and to which part of an object store: the projects
// listed ("*": every project) may use keys of `bucket` that start with
// `prefix` ("": the whole bucket); read_only: stage-in only.
struct ObjectStoreAccess {
  std::vector<std::string> projects;
  std::string bucket;
  std::string prefix;
  bool read_only = false;
};

// An S3 service jobs stage data from and to (docs/data.md): its
// credentials are secrets of the project `credentials_project`, named by
// `access_key_secret` and `secret_key_secret` (docs/secrets.md), decrypted
// per launch and never shown to the job.
struct ObjectStore {
  std::string name;      // the STORE of s3://STORE/bucket/key
  std::string endpoint;  // scheme://host[:port]
  std::string region = "us-east-1";
  bool path_style = true;
  std::string credentials_project;
  std::string access_key_secret;
  std::string secret_key_secret;
  std::vector<ObjectStoreAccess> access{};
  // The storage tier of what lifecycle rules archive to it, sampled and
  // charged as storage_gb_hours (storage.tiers).
  std::string tier = "cold";
};

// A lifecycle rule (docs/data.md, "Lifecycle"), one of two kinds. Archive
// (`shared` set): files of a shared file system's project directories (of
// `projects`, or every project) not modified for `older_than_days` go to
// `archive_to` (s3://STORE/bucket/prefix/, each under <project>/<its path>)
// and are removed from the file system once stored. Expire (`objects`
// set): objects under s3://STORE/bucket/prefix older than
// `older_than_days` are deleted.
struct LifecycleRule {
  std::string name;
  std::string shared;
  std::vector<std::string> projects{};
  std::string archive_to;
  std::string objects;
  double older_than_days = 0;
};

// A storage tier's price (docs/data.md, "Storage tiers"): storage_gb_hours
// charged in the tier cost price_per_gb_hour each. Three tiers exist
// without being listed: "hot" (shared file systems and projects'
// storage_paths), "cold" (lifecycle archives in object stores) and
// "scratch" (running jobs' work directories); a site may list others and
// name them in storage.shared[].tier or storage.object_stores[].tier.
struct StorageTier {
  std::string name;
  double price_per_gb_hour = 0;
};
inline constexpr const char* kHotTier = "hot";
inline constexpr const char* kColdTier = "cold";
inline constexpr const char* kScratchTier = "scratch";

struct StorageSettings {
  std::vector<SharedFileSystem> shared;
  std::vector<ObjectStore> object_stores{};
  std::vector<LifecycleRule> lifecycle{};
  int lifecycle_interval_minutes = 60;  // how often the daemon applies the rules; 0: only when asked
  std::vector<StorageTier> tiers{};
  // The shared file system (a `shared` name) where each workflow has a
  // directory for its tasks' files, <project dir>/workflows/<id>
  // (docs/workflows.md); empty: the first read-write one, if any.
  std::string workflow_dirs{};
  // The price per GB-hour of `tier`; 0 where it has none.
  double TierPrice(const std::string& tier) const {
    for (const auto& t : tiers) {
      if (t.name == tier) return t.price_per_gb_hour;
    }
    return 0;
  }
  const ObjectStore* FindObjectStore(const std::string& name) const {
    for (const auto& store : object_stores) {
      if (store.name == name) return &store;
    }
    return nullptr;
  }
};

// Sandboxes (docs/sandboxes.md): the runtime of API sandboxes and agent jobs.
struct SandboxSettings {
  std::string init_path;         // empty: unisched-sandbox beside the binary
  std::string queue;             // of API sandboxes by default; empty: where the router sends an agent job
  int64_t uid_base = 3'000'000;  // each instance runs as a uid of its own from [uid_base, uid_base + uid_count)
  int64_t uid_count = 100'000;
  std::string uid_lock_dir = "/run/unisched/sandbox-uids";  // host-wide: leases shared by every daemon
  int64_t output_cap_bytes = 1 << 20;                       // per stream of an exec; the rest is cut (stdout_truncated)
  int64_t max_file_bytes = 8 << 20;                         // a file upload or download
  int create_wait_seconds = 30;  // at max_concurrency or a quota, with quota_action wait: how long a create waits
  int pids_max = 256;            // processes per instance (fork bombs)
  int default_cpus = 1;
  int default_timeout_seconds = 300;  // per exec, when the queue gives no default wall time
  int default_idle_seconds = 600;     // when the queue has no scale_in_idle_seconds
  std::string default_image = "host";
};

// `unisched baseline` (docs/baseline.md), read by the CLI from the config in
// force (GET /v1/config).
struct BaselineSettings {
  // The multi-GPU training speed-up: a command doing a fixed amount of
  // training work, run by /bin/sh -c on one GPU node with 1 GPU and with all
  // of the node's GPUs (CUDA_VISIBLE_DEVICES, UNISCHED_BASELINE_GPUS); the
  // speed-up is the first run's time over the second's. Empty: not measured.
  std::string gpu_command;
  // The device file that shows GPU `{index}` (of CUDA_VISIBLE_DEVICES) is
  // on the node, not only declared: the check job looks for a character
  // device there before any training run. Other vendors' or a site's own
  // layout set theirs.
  std::string gpu_device = "/dev/nvidia{index}";
};

// Where a role's credentials may be used from and how often (docs/access.md).
// A token's own limits (POST /v1/users/{name}/tokens) apply on top: a
// request must pass both.
struct AccessRule {
  std::vector<std::string> allow_from;  // CIDR ranges ("10.0.0.0/8", "::1/128"); empty: any address
  double requests_per_second = 0;       // per token; 0: no limit
  double burst = 0;                     // requests at once; 0: the rate (at least 1)
};

struct AccessSettings {
  // By role: "user", "queue-admin", "platform-admin", and "node" (agents' tokens).
  std::map<std::string, AccessRule> roles;
  // Bearer JWTs from the centre's identity provider; off without jwks_file.
  auth::JwtSettings jwt;
};

struct Config {
  ServerSettings server;
  AccessSettings access;
  SandboxSettings sandboxes;
  std::vector<ImageSpec> images;
  StorageSettings storage;
  AlertSettings alerts;
  StoreSettings store;
  HealthSettings health;
  ExecutorSettings executor;
  BaselineSettings baseline;
  // Also holds the `scheduler:` section (fairshare_half_life_hours,
  // fairshare_gpu_weight) and, once loaded, the projects' policies.
  model::ClusterSpec cluster;
  std::vector<ProjectSpec> projects;
  std::vector<UserSpec> users;
  std::string version;  // content hash of the source text; every job records it
  std::string text;     // the source text (LoadConfigText); what the store keeps as a config version
  // A canary (docs/config-versions.md): canary_queue routes, limits and
  // orders its jobs by the version whose hash is canary_version; its jobs
  // record that one. Empty: no canary.
  std::string canary_queue;
  std::string canary_version;
  // The version's number in the store (0 before the store was read).
  int64_t number = 0;
  int64_t canary_number = 0;
  // The version a job in `queue` is admitted under.
  const std::string& VersionFor(const std::string& queue) const {
    return !canary_queue.empty() && queue == canary_queue ? canary_version : version;
  }
};

struct ConfigError {
  std::string path;     // key path, e.g. "queues[1].policy.max_concurrency"
  std::string message;  // e.g. "must be > 0"
  std::string ToString() const { return path.empty() ? message : path + ": " + message; }
};

using LoadResult = std::variant<Config, std::vector<ConfigError>>;

// Parses and validates YAML text. source_name is used in messages only.
// A loaded Config has its derived fields filled in: each node's pool and
// merged labels; in each queue policy, gpu_quota_per_project and
// project_quota.gpus (the same limit) both set when either is written; and
// cluster.projects, one model::ProjectPolicy per entry of projects.
LoadResult LoadConfigText(std::string_view yaml_text, std::string_view source_name = "<config>");
LoadResult LoadConfigFile(const std::string& path);
// The value rules of docs/config.md (ranges, name formats, unique names,
// references, each node in exactly one pool) applied to a typed Config, e.g.
// one built in code. Returns every violation; empty when valid. The loaders
// above already apply it.
std::vector<ConfigError> ValidateConfig(const Config& config);
// The rules of one image (name, version, rootfs, binds), for POST /v1/images;
// paths are the image's own keys ("version", "binds[0]").
std::vector<ConfigError> ValidateImage(const ImageSpec& image);
// executor.work_dir_retention_hours, or when left out a week, or half the
// job records' retention (store.job_retention_days) when that is shorter,
// since it must end before the record's.
double WorkDirRetentionHours(const Config& config);
// The variable a job finds a shared file system in: UNISCHED_SHARED_ and its
// name upper-cased with '-' as '_' ("scratch-2" -> UNISCHED_SHARED_SCRATCH_2).
std::string SharedVariable(const std::string& name);
// The text of config/unisched.yaml, compiled into the binary.
std::string_view EmbeddedDefaultConfig();
// The config at `path`, or the embedded default when `path` is empty (what
// `unisched server` and `unisched store` run on without --config).
LoadResult LoadConfigFileOrDefault(const std::string& path);

}  // namespace unisched::config
