// unisched-stage-bench URL ACCESS_KEY SECRET_KEY [TOTAL_BYTES] [OBJECTS] [PARALLEL]
//
// Data staging against an S3 server on loopback (docs/data.md, issue 23
// point 7): TOTAL_BYTES (1 GiB) in OBJECTS (16) objects, moved out and in by
// the executor's own staging code (executor::StageOut, executor::StageIn:
// what a job's stage-out and stage-in run) and by curl alone (its own
// SigV4), PARALLEL (4) transfers at a time each, side by side in one run.
// Prints MB/s (10^6 bytes) and CPU-seconds per GiB of each, the ratio of
// ours to curl's, and one JSON line. Ours checks integrity (each upload's
// Content-MD5, each download's MD5 against its ETag) and plain curl does
// not, so curl is also timed doing that work (openssl md5 before each
// upload, md5sum after each download). Every byte is checked: what came back
// equals what went up.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "executor/stager.h"
#include "unisched/objectstore/s3.h"

namespace {

namespace fs = std::filesystem;
using namespace unisched;

double CpuSeconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Measured {
  double seconds = 0;
  double cpu_seconds = 0;
};

// Runs `work` and measures its wall time and the CPU time of this process
// (ours) or of its children (curl's), which is what `work` spends.
template <class Work>
Measured Measure(int who, Work&& work) {
  const double cpu0 = CpuSeconds(who);
  const auto t0 = std::chrono::steady_clock::now();
  work();
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.cpu_seconds = CpuSeconds(who) - cpu0;
  return m;
}

bool SameFiles(const std::string& a, const std::string& b) {
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  std::vector<char> bx(1 << 20), by(1 << 20);
  while (x && y) {
    x.read(bx.data(), static_cast<std::streamsize>(bx.size()));
    y.read(by.data(), static_cast<std::streamsize>(by.size()));
    if (x.gcount() != y.gcount() || !std::equal(bx.begin(), bx.begin() + x.gcount(), by.begin())) return false;
  }
  return !x && !y;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s URL ACCESS_KEY SECRET_KEY [TOTAL_BYTES] [OBJECTS] [PARALLEL]\n", argv[0]);
    return 2;
  }
  const std::string url = argv[1], access = argv[2], secret = argv[3];
  const int64_t total = argc > 4 ? std::atoll(argv[4]) : int64_t{1} << 30;
  const int objects = argc > 5 ? std::atoi(argv[5]) : 16;
  const int parallel = argc > 6 ? std::atoi(argv[6]) : 4;
  const int64_t each = total / objects;

  const fs::path dir = fs::temp_directory_path() / ("unisched-stage-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir / "work" / "out");
  fs::create_directories(dir / "curl-in");
  const std::string bucket = "bench-" + std::to_string(::getpid());
  objectstore::S3Client client({url, "us-east-1", true, access, secret, ""});
  if (Status s = client.CreateBucket(bucket); !s.ok()) {
    std::fprintf(stderr, "cannot create bucket %s: %s\n", bucket.c_str(), s.error().message.c_str());
    return 1;
  }
  // The objects: random bytes (nothing compresses or deduplicates).
  std::mt19937_64 rng(42);
  std::vector<uint64_t> block(each / 8 + 1);
  for (int i = 0; i < objects; ++i) {
    for (auto& word : block) word = rng();
    std::ofstream(dir / "work" / "out" / ("obj-" + std::to_string(i)), std::ios::binary)
        .write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(each));
  }

  executor::LaunchSpec spec;
  spec.job_id = 1;
  spec.stores = {{"bench", url, "us-east-1", true, access, secret}};
  spec.data.stage_out = {{"out/", "s3://bench/" + bucket + "/ours/", model::StageWhen::kSuccess}};
  spec.data.stage_in = {{"s3://bench/" + bucket + "/ours/", "in/"}};

  // curl alone: the same objects, PARALLEL processes at a time (xargs -P).
  const std::string curl = "curl -sf --aws-sigv4 'aws:amz:us-east-1:s3' --user '" + access + ":" + secret +
                           "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' ";
  const std::string names =
      "seq 0 " + std::to_string(objects - 1) + " | xargs -P " + std::to_string(parallel) + " -I{} ";
  const std::string up_cmd =
      names + curl + "-T " + (dir / "work" / "out").string() + "/obj-{} '" + url + "/" + bucket + "/curl/obj-{}'";
  const std::string down_cmd =
      names + curl + "-o " + (dir / "curl-in").string() + "/obj-{} '" + url + "/" + bucket + "/curl/obj-{}'";

  // curl doing the integrity work ours does: each upload with its
  // Content-MD5 (openssl md5 first), each download's MD5 computed after.
  const std::string out_dir = (dir / "work" / "out").string(), back_dir = (dir / "curl-in").string();
  std::ofstream(dir / "up-md5.sh") << curl << "-H \"Content-MD5: $(openssl md5 -binary " << out_dir
                                   << "/obj-$1 | base64)\" -T " << out_dir << "/obj-$1 \"" << url << "/" << bucket
                                   << "/curl-md5/obj-$1\"\n";
  std::ofstream(dir / "down-md5.sh") << curl << "-o " << back_dir << "/obj-$1 \"" << url << "/" << bucket
                                     << "/curl-md5/obj-$1\" && md5sum " << back_dir << "/obj-$1 > /dev/null\n";
  const std::string up_md5_cmd = names + "sh " + (dir / "up-md5.sh").string() + " {}";
  const std::string down_md5_cmd = names + "sh " + (dir / "down-md5.sh").string() + " {}";

  bool ok = true;
  const Measured curl_up = Measure(RUSAGE_CHILDREN, [&] { ok = ok && std::system(up_cmd.c_str()) == 0; });
  const Measured curl_md5_up = Measure(RUSAGE_CHILDREN, [&] { ok = ok && std::system(up_md5_cmd.c_str()) == 0; });
  executor::StageCounters counters;
  Result<executor::StageTotals> out = Error::Internal("not run");
  const Measured ours_out =
      Measure(RUSAGE_SELF, [&] { out = executor::StageOut(spec, (dir / "work").string(), true, counters); });
  const Measured curl_down = Measure(RUSAGE_CHILDREN, [&] { ok = ok && std::system(down_cmd.c_str()) == 0; });
  const Measured curl_md5_down = Measure(RUSAGE_CHILDREN, [&] { ok = ok && std::system(down_md5_cmd.c_str()) == 0; });
  executor::StageCache cache((dir / "cache").string(), 0);  // nothing kept: every object fetched
  Result<executor::StageTotals> in = Error::Internal("not run");
  const Measured ours_in =
      Measure(RUSAGE_SELF, [&] { in = executor::StageIn(spec, (dir / "work").string(), {}, cache, counters); });
  if (!ok || !out.ok() || !in.ok()) {
    std::fprintf(stderr, "a transfer failed: curl %s, stage-out %s, stage-in %s\n", ok ? "ok" : "failed",
                 out.ok() ? "ok" : out.error().message.c_str(), in.ok() ? "ok" : in.error().message.c_str());
    fs::remove_all(dir);
    return 1;
  }
  for (int i = 0; i < objects; ++i) {
    const std::string name = "obj-" + std::to_string(i);
    const std::string sent = (dir / "work" / "out" / name).string();
    if (!SameFiles(sent, (dir / "work" / "in" / name).string()) ||
        !SameFiles(sent, (dir / "curl-in" / name).string())) {
      std::fprintf(stderr, "%s came back different\n", name.c_str());
      fs::remove_all(dir);
      return 1;
    }
  }
  const double moved = static_cast<double>(each) * objects;
  auto mbs = [&](const Measured& m) { return moved / 1e6 / m.seconds; };
  auto cpu_per_gib = [&](const Measured& m) { return m.cpu_seconds / (moved / (1 << 30)); };
  std::printf("%d objects of %lld bytes (%.2f GiB), %d at a time, on %s\n", objects, static_cast<long long>(each),
              moved / (1 << 30), parallel, url.c_str());
  std::printf("%-22s %10s %14s %10s\n", "", "MB/s", "CPU s / GiB", "of curl");
  std::printf("%-22s %10.0f %14.2f %10s\n", "upload: curl", mbs(curl_up), cpu_per_gib(curl_up), "");
  std::printf("%-22s %10.0f %14.2f %10s\n", "upload: curl + MD5", mbs(curl_md5_up), cpu_per_gib(curl_md5_up), "");
  std::printf("%-22s %10.0f %14.2f %9.0f%% (%.0f%% of curl + MD5)\n", "upload: stage-out", mbs(ours_out),
              cpu_per_gib(ours_out), 100.0 * mbs(ours_out) / mbs(curl_up), 100.0 * mbs(ours_out) / mbs(curl_md5_up));
  std::printf("%-22s %10.0f %14.2f %10s\n", "download: curl", mbs(curl_down), cpu_per_gib(curl_down), "");
  std::printf("%-22s %10.0f %14.2f %10s\n", "download: curl + MD5", mbs(curl_md5_down), cpu_per_gib(curl_md5_down), "");
  std::printf("%-22s %10.0f %14.2f %9.0f%% (%.0f%% of curl + MD5)\n", "download: stage-in", mbs(ours_in),
              cpu_per_gib(ours_in), 100.0 * mbs(ours_in) / mbs(curl_down), 100.0 * mbs(ours_in) / mbs(curl_md5_down));
  std::printf(
      "{\"bench\":\"staging\",\"bytes\":%.0f,\"objects\":%d,\"parallel\":%d,\"curl_up_mbs\":%.1f,\"stage_out_mbs\":%."
      "1f,"
      "\"curl_down_mbs\":%.1f,\"stage_in_mbs\":%.1f,\"curl_md5_up_mbs\":%.1f,\"curl_md5_down_mbs\":%.1f,\"curl_up_cpu_"
      "per_gib\":%.3f,\"stage_out_cpu_per_gib\":%.3f,"
      "\"curl_down_cpu_per_gib\":%.3f,\"stage_in_cpu_per_gib\":%.3f}\n",
      moved, objects, parallel, mbs(curl_up), mbs(ours_out), mbs(curl_down), mbs(ours_in), mbs(curl_md5_up),
      mbs(curl_md5_down), cpu_per_gib(curl_up), cpu_per_gib(ours_out), cpu_per_gib(curl_down), cpu_per_gib(ours_in));
  // The bucket's objects go with the server (a throw-away one); the files now.
  fs::remove_all(dir);
  return 0;
}
