#pragma once
// An S3 client (docs/data.md): what stage-in, stage-out and lifecycle move
// data with. Requests are signed with AWS Signature Version 4 by libcurl
// (CURLOPT_AWS_SIGV4: no signing code of our own) and sent to any S3
// service: AWS, Ceph's radosgw, MinIO, ... path- or virtual-host-style.
//
// Objects stream between files and the network (no object is held in
// memory); one above `multipart_threshold` goes up in parts of `part_bytes`,
// `parallel` at a time; every request is retried with exponential backoff
// and jitter on a transport error, 429 or 5xx (never on another 4xx, whose
// S3 error code is returned). Integrity: each upload and part carries its
// Content-MD5, which the server checks; a download is checked against the
// object's ETag when that is its MD5 (an object put in one part), and
// always against its length.
//
// Thread-safe: each call uses handles of its own.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "unisched/common/status.h"
#include "unisched/model/data_staging.h"

namespace unisched::objectstore {

struct S3Endpoint {
  std::string url;  // scheme://host[:port], e.g. https://s3.eu-west-1.amazonaws.com
  std::string region = "us-east-1";
  bool path_style = true;  // URL/bucket/key; false: bucket.host/key
  std::string access_key;
  std::string secret_key;
  std::string ca_file{};  // verifies https; empty: the system's CAs
};

struct S3Options {
  int max_attempts = 5;                             // per request, the first included
  std::chrono::milliseconds backoff{200};           // doubled per retry, with jitter
  int64_t part_bytes = int64_t{16} << 20;           // multipart part size (S3: >= 5 MiB but the last)
  int64_t multipart_threshold = int64_t{64} << 20;  // larger files go up in parts
  int parallel = 4;                                 // parts (and objects, in a batch) at a time
  std::chrono::seconds request_timeout{0};          // 0: none (a part of a slow link may take long)
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds low_speed_time{60};  // a transfer below 1 KiB/s this long fails
  // Set (may be null): a transfer under way stops within a fraction of a
  // second once it reads true, and nothing more is retried (s3_cancelled).
  const std::atomic<bool>* cancelled = nullptr;
};

struct ObjectInfo {
  std::string key;
  int64_t size = 0;
  std::string etag;           // without quotes
  std::string last_modified;  // as the server wrote it (ISO 8601 in listings)
};

struct TransferStats {
  int64_t bytes = 0;
  int parts = 1;
  int retries = 0;
  std::string etag;
};

// Progress of a transfer: the bytes moved since the last call, negative when
// a failed try's bytes are taken back (called from transfer threads).
using Progress = std::function<void(int64_t bytes_done)>;

class S3Client {
 public:
  explicit S3Client(S3Endpoint endpoint, S3Options options = {});

  Status CreateBucket(const std::string& bucket) const;
  // Every object under `prefix` (all pages of ListObjectsV2), by key.
  Result<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) const;
  // nullopt when there is no such object.
  Result<std::optional<ObjectInfo>> Head(const std::string& bucket, const std::string& key) const;
  Result<TransferStats> Upload(const std::string& bucket, const std::string& key, const std::string& file,
                               const Progress& progress = {}) const;
  // Into `file` through a temporary file beside it, renamed when complete
  // and checked.
  Result<TransferStats> Download(const std::string& bucket, const std::string& key, const std::string& file,
                                 const Progress& progress = {}) const;
  Status Delete(const std::string& bucket, const std::string& key) const;

  const S3Endpoint& endpoint() const { return endpoint_; }
  const S3Options& options() const { return options_; }

 private:
  struct Request;
  struct Response;
  // One request, retried as S3Options says.
  Result<Response> Send(Request& request) const;
  Result<Response> SendOnce(Request& request) const;
  std::string Url(const std::string& bucket, const std::string& key, const std::string& query) const;
  Result<TransferStats> UploadParts(const std::string& bucket, const std::string& key, const std::string& file,
                                    int64_t size, const Progress& progress) const;

  S3Endpoint endpoint_;
  S3Options options_;
};

// RFC 3986 percent-encoding as SigV4 canonicalises it: unreserved
// characters stay, '/' too when `keep_slash` (object keys), the rest %XX.
std::string UriEncode(const std::string& text, bool keep_slash);

// "s3://STORE/bucket/some/prefix/" -> {store, bucket, key}; an error names
// the field.
using S3Url = model::StoreUrl;
inline Result<S3Url> ParseS3Url(const std::string& url, const std::string& field) {
  return model::ParseStoreUrl(url, field);
}

}  // namespace unisched::objectstore
