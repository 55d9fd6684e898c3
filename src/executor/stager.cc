// Stage-in and stage-out (stager.h).

#include "executor/stager.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <vector>

#include "unisched/auth/auth.h"
#include "unisched/objectstore/s3.h"
#include "unisched/posix/posix.h"

namespace unisched::executor {
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // A path that reopens this very file or directory, whatever happens to
  // the names that led to it.
  std::string ProcPath() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

std::vector<std::string> Parts(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start && path.compare(start, end - start, ".") != 0) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

Error PathError(const std::string& what, int err) {
  return Error::Unprocessable("stage_path", what + ": " + posix::ErrnoText(err));
}

// The directory `relative` below `root`, each name opened with O_NOFOLLOW
// (a symbolic link is ELOOP/ENOTDIR, never followed); with `create`,
// missing ones are made 0755 and given to `owner`.
Result<Fd> OpenBeneath(int root, const std::string& relative, bool create, const StageOwner& owner,
                       const std::string& what) {
  Fd dir(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!dir.ok()) return PathError(what, errno);
  for (const std::string& part : Parts(relative)) {
    int fd = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) return PathError(what, errno);
      fd = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        (void)::fchmod(fd, 0755);  // whatever the umask
        if (owner.chown && ::fchown(fd, owner.uid, owner.gid) != 0) {
          ::close(fd);
          return PathError(what, errno);
        }
      }
    }
    if (fd < 0) return PathError(what, errno == ELOOP ? ENOTDIR : errno);
    dir = Fd(fd);
  }
  return dir;
}

// The job's work directory, made for `owner` when missing (the supervisor
// makes it the same way when nothing is staged).
Result<Fd> OpenWorkDir(const std::string& work_dir, const StageOwner& owner) {
  if (::mkdir(work_dir.c_str(), 0700) == 0) {
    if (owner.chown && ::chown(work_dir.c_str(), owner.uid, owner.gid) != 0) return PathError(work_dir, errno);
  } else if (errno != EEXIST) {
    return PathError("cannot create " + work_dir, errno);
  }
  Fd fd(::open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok()) return PathError(work_dir, errno);
  return fd;
}

objectstore::S3Client ClientFor(const StoreEndpoint& store, const StageCounters& counters) {
  objectstore::S3Options options;
  options.cancelled = &counters.cancelled;
  objectstore::S3Endpoint endpoint;
  endpoint.url = store.endpoint;
  endpoint.region = store.region;
  endpoint.path_style = store.path_style;
  endpoint.access_key = store.access_key;
  endpoint.secret_key = store.secret_key;
  return objectstore::S3Client(std::move(endpoint), options);
}

Error Cancelled() {
  return {ErrorKind::kUnavailable, "s3_cancelled", "cancelled", {}};
}

const StoreEndpoint* FindStore(const LaunchSpec& spec, const std::string& name) {
  for (const auto& store : spec.stores) {
    if (store.name == name) return &store;
  }
  return nullptr;
}

std::string Base(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
std::string Dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// At most `parallel` of `work` at a time; the first error wins, and none
// starts once `cancelled` reads true.
Status RunParallel(size_t count, int parallel, const std::atomic<bool>& cancelled,
                   const std::function<Status(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::optional<Error> first;
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) {
      {
        std::lock_guard lock(mu);
        if (!first && cancelled.load()) first = Cancelled();
        if (first) return;
      }
      Status s = work(i);
      if (!s.ok()) {
        std::lock_guard lock(mu);
        if (!first) first = s.error();
      }
    }
  };
  const size_t threads = std::min<size_t>(count, static_cast<size_t>(std::max(1, parallel)));
  std::vector<std::future<void>> running;
  for (size_t t = 1; t < threads; ++t) running.push_back(std::async(std::launch::async, worker));
  worker();
  for (auto& f : running) f.get();
  if (first) return *first;
  return Status::Ok();
}

}  // namespace

StageCache::StageCache(std::string dir, int64_t cap_bytes) : dir_(std::move(dir)), cap_bytes_(cap_bytes) {}

namespace {

// Whether a download's temporary name (<name>.part-<pid>-<n>) belongs to a
// process that is gone: Trim never counts one, so nothing else removes it.
bool AbandonedPart(const std::string& name) {
  const auto at = name.find(".part-");
  if (at == std::string::npos) return false;
  const long pid = std::strtol(name.c_str() + at + 6, nullptr, 10);
  return pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

bool StageCache::Ready() const {
  // Made at first use, under the executor's work root, which is made by
  // then (LocalExecutor::MakeRoots before any stage-in).
  if (ready_.load()) return true;
  std::lock_guard lock(trim_mu_);
  if (ready_.load()) return true;
  if (dir_.empty() || (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)) return false;
  // The partial downloads of a process killed mid-transfer.
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (AbandonedPart(e->d_name)) (void)::unlinkat(::dirfd(d), e->d_name, 0);
    }
    ::closedir(d);
  }
  ready_ = true;
  return true;
}

std::string StageCache::PathOf(const std::string& endpoint, const std::string& bucket, const std::string& key,
                               const std::string& etag) const {
  if (!Ready()) return "";
  // SHA-256, not a short hash: a key chosen to collide would hand one
  // project's object to another's job.
  return dir_ + "/" + auth::HashToken(endpoint + "\n" + bucket + "\n" + key + "\n" + etag);
}

bool StageCache::Hit(const std::string& path, int64_t size) const {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != size) return false;
  (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // used now
  return true;
}

void StageCache::Trim() {
  if (dir_.empty()) return;
  std::lock_guard lock(trim_mu_);
  struct Entry {
    int64_t mtime_ns;
    int64_t size;
    std::string path;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != 64) continue;  // a download in progress is name.part-...
    struct stat st {};
    const std::string path = dir_ + "/" + name;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    entries.push_back({st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec, st.st_size, path});
    total += st.st_size;
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
  for (const Entry& e : entries) {
    if (total <= cap_bytes_) break;
    if (::unlink(e.path.c_str()) == 0) total -= e.size;
  }
}

Result<StageTotals> StageIn(const LaunchSpec& spec, const std::string& work_dir, const StageOwner& owner,
                            StageCache& cache, StageCounters& counters) {
  auto work = OpenWorkDir(work_dir, owner);
  if (!work.ok()) return work.error();
  struct Item {
    const StoreEndpoint* store;
    std::string url;  // s3://STORE/bucket/key, for messages
    std::string bucket;
    objectstore::ObjectInfo object;
    std::string target;  // relative to the work directory
  };
  std::vector<Item> items;
  for (size_t i = 0; i < spec.data.stage_in.size(); ++i) {
    const model::StageIn& stage = spec.data.stage_in[i];
    auto url = model::ParseStoreUrl(stage.from, "data.stage_in[" + std::to_string(i) + "].from");
    if (!url.ok()) return url.error();
    const StoreEndpoint* store = FindStore(spec, url->store);
    if (store == nullptr) return Error::Unavailable(stage.from + ": the launch carries no object store " + url->store);
    if (counters.cancelled.load()) return Cancelled();
    const objectstore::S3Client client = ClientFor(*store, counters);
    std::vector<objectstore::ObjectInfo> objects;
    if (url->key.empty() || url->key.back() == '/') {
      auto listed = client.List(url->bucket, url->key);
      if (!listed.ok()) return Error::Unavailable(stage.from + ": " + listed.error().message);
      objects = std::move(listed).value();
    } else {
      auto head = client.Head(url->bucket, url->key);
      if (!head.ok()) return Error::Unavailable(stage.from + ": " + head.error().message);
      if (!head->has_value()) return Error::NotFound(stage.from + ": no such object");
      objects.push_back(**head);
    }
    for (auto& object : objects) {
      if (!object.key.empty() && object.key.back() == '/') continue;  // a "folder" marker
      std::string target = model::StageInTarget(*url, stage.to, object.key);
      const std::string object_url = "s3://" + url->store + "/" + url->bucket + "/" + object.key;
      if (target.empty())
        return Error::Unprocessable("stage_path", object_url + ": its key is no path in the work directory");
      counters.total += object.size;
      items.push_back({store, object_url, url->bucket, std::move(object), std::move(target)});
    }
  }
  std::atomic<int64_t> fetched{0};
  Status s = RunParallel(items.size(), objectstore::S3Options{}.parallel, counters.cancelled, [&](size_t i) -> Status {
    const Item& item = items[i];
    auto dir = OpenBeneath(work->get(), Dir(item.target), /*create=*/true, owner, item.target);
    if (!dir.ok()) return Error::Unprocessable("stage_path", item.url + ": " + dir.error().message);
    const std::string name = Base(item.target);
    const std::string cached = cache.PathOf(item.store->endpoint, item.bucket, item.object.key, item.object.etag);
    if (cached.empty()) return Error::Unavailable("the node's stage cache directory is unusable");
    if (!cache.Hit(cached, item.object.size)) {
      std::atomic<int64_t> moved{0};
      auto got = ClientFor(*item.store, counters).Download(item.bucket, item.object.key, cached, [&](int64_t delta) {
        counters.done += delta;
        moved += delta;
      });
      counters.done -= moved;  // counted once, below, whatever the callbacks said
      if (!got.ok()) {
        if (got.error().code == "s3_cancelled") return Cancelled();
        return Error::Unavailable(item.url + ": " + got.error().message);
      }
      // Readable by the job's account (a sandboxed job's leased uid
      // included) through the link; the cache directory itself is root's.
      (void)::chmod(cached.c_str(), 0644);
      fetched += got->bytes;
    }
    counters.done += item.object.size;
    // Replace whatever the name holds (a link the job left is replaced, not followed).
    if (::unlinkat(dir->get(), name.c_str(), 0) != 0 && errno != ENOENT)
      return PathError(item.url + ": " + item.target, errno);
    if (::linkat(AT_FDCWD, cached.c_str(), dir->get(), name.c_str(), 0) == 0) return Status::Ok();
    if (errno != EXDEV && errno != EPERM) return PathError(item.url + ": " + item.target, errno);
    // Another file system: a copy of the job's own.
    Fd in(::open(cached.c_str(), O_RDONLY | O_CLOEXEC));
    Fd out(::openat(dir->get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!in.ok() || !out.ok()) return PathError(item.url + ": " + item.target, errno);
    for (;;) {
      const ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, 1 << 30, 0);
      if (n == 0) break;
      if (n < 0) return PathError(item.url + ": copying to " + item.target, errno);
    }
    if (owner.chown && ::fchown(out.get(), owner.uid, owner.gid) != 0) return PathError(item.target, errno);
    return Status::Ok();
  });
  cache.Trim();
  if (!s.ok()) return s.error();
  return StageTotals{fetched.load(), static_cast<int64_t>(items.size())};
}

namespace {

// Regular files below `dir` (relative to it), through directories only: a
// symbolic link or anything else is skipped.
void ListFiles(int dir, const std::string& prefix, std::vector<std::pair<std::string, int64_t>>& out, int depth) {
  if (depth > 64) return;
  const int fd = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      out.emplace_back(prefix + name, st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      ListFiles(sub, prefix + name + "/", out, depth + 1);
      ::close(sub);
    }
  }
  ::closedir(d);
}

}  // namespace

void OpenedBeneath::Close() {
  if (file_fd >= 0) ::close(file_fd);
  if (dir_fd >= 0) ::close(dir_fd);
  file_fd = dir_fd = -1;
}

Result<OpenedBeneath> OpenFileBeneath(const std::string& root, const std::string& relative) {
  Fd top(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!top.ok()) return PathError(root, errno);
  auto dir = OpenBeneath(top.get(), Dir(relative), /*create=*/false, StageOwner{}, relative);
  if (!dir.ok()) return dir.error();
  const std::string name = Base(relative);
  const int file = ::openat(dir->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (file < 0) return PathError(root + "/" + relative, errno);
  struct stat st {};
  if (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(file);
    return PathError(root + "/" + relative, EINVAL);
  }
  OpenedBeneath out;
  out.dir_fd = ::fcntl(dir->get(), F_DUPFD_CLOEXEC, 0);
  out.file_fd = file;
  out.name = name;
  return out;
}

Result<StageTotals> StageOut(const LaunchSpec& spec, const std::string& work_dir, bool succeeded,
                             StageCounters& counters) {
  Fd work(::open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!work.ok()) return PathError(work_dir, errno);
  struct Item {
    const StoreEndpoint* store;
    std::string bucket, key, url;
    std::string path;  // relative to the work directory
    int64_t size = 0;
  };
  std::vector<Item> items;
  const StageOwner none;
  for (size_t i = 0; i < spec.data.stage_out.size(); ++i) {
    const model::StageOut& stage = spec.data.stage_out[i];
    if (!succeeded && stage.when != model::StageWhen::kAlways) continue;
    auto url = model::ParseStoreUrl(stage.to, "data.stage_out[" + std::to_string(i) + "].to");
    if (!url.ok()) return url.error();
    const StoreEndpoint* store = FindStore(spec, url->store);
    if (store == nullptr) return Error::Unavailable(stage.to + ": the launch carries no object store " + url->store);
    // `from` is a directory (every file below it) or one file.
    std::string from = stage.from;
    while (!from.empty() && from.back() == '/') from.pop_back();
    std::vector<std::pair<std::string, int64_t>> files;
    auto dir = OpenBeneath(work.get(), from, /*create=*/false, none, stage.from);
    if (dir.ok()) {
      ListFiles(dir->get(), "", files, 0);
      for (auto& [relative, size] : files) {
        const std::string key = model::StageOutKey(*url, stage.from, relative);
        items.push_back({store, url->bucket, key, "s3://" + url->store + "/" + url->bucket + "/" + key,
                         from.empty() ? relative : from + "/" + relative, size});
      }
      continue;
    }
    auto parent = OpenBeneath(work.get(), Dir(from), /*create=*/false, none, stage.from);
    struct stat st {};
    if (from.empty() || !parent.ok() || ::fstatat(parent->get(), Base(from).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      // Nothing to send is not a failure of the job's: an empty result set.
      continue;
    }
    const std::string key = model::StageOutKey(*url, stage.from, "");
    items.push_back({store, url->bucket, key, "s3://" + url->store + "/" + url->bucket + "/" + key, from, st.st_size});
  }
  for (const Item& item : items) counters.total += item.size;
  std::atomic<int64_t> sent{0};
  Status s = RunParallel(items.size(), objectstore::S3Options{}.parallel, counters.cancelled, [&](size_t i) -> Status {
    const Item& item = items[i];
    auto dir = OpenBeneath(work.get(), Dir(item.path), /*create=*/false, none, item.path);
    if (!dir.ok()) return Error::Unprocessable("stage_path", item.path + ": " + dir.error().message);
    Fd file(::openat(dir->get(), Base(item.path).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!file.ok()) return PathError(item.path, errno);
    std::atomic<int64_t> moved{0};
    auto put = ClientFor(*item.store, counters).Upload(item.bucket, item.key, file.ProcPath(), [&](int64_t delta) {
      counters.done += delta;
      moved += delta;
    });
    counters.done += item.size - moved;
    if (!put.ok()) return Error::Unavailable(item.path + " to " + item.url + ": " + put.error().message);
    sent += put->bytes;
    return Status::Ok();
  });
  if (!s.ok()) return s.error();
  return StageTotals{sent.load(), static_cast<int64_t>(items.size())};
}

}  // namespace unisched::executor
