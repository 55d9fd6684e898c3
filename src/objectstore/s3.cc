// S3Client: see unisched/objectstore/s3.h.

#include "unisched/objectstore/s3.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <tinyxml2.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "unisched/posix/shared_library.h"

namespace unisched::objectstore {

namespace {

// libcurl's entry points. libcurl is opened when the first request is sent
// rather than linked: with its own dependencies (Kerberos, LDAP, GnuTLS,
// libssh2, ...) it cost every process about 5 ms to load and relocate, a
// CLI command and a trace replay too, though only the staging of a job's
// data uses it (ADR 0013). Each function is listed once, as store/libpq.h
// lists libpq's: the struct's members and the lookups are made from it.
#define UNISCHED_CURL_FUNCTIONS(X) \
  X(curl_global_init)              \
  X(curl_easy_init)                \
  X(curl_easy_cleanup)             \
  X(curl_easy_setopt)              \
  X(curl_easy_getinfo)             \
  X(curl_easy_perform)             \
  X(curl_easy_strerror)            \
  X(curl_slist_append)             \
  X(curl_slist_free_all)

// The functions, typed as curl.h declares them: called as Curl()->curl_easy_init().
struct CurlApi {
#define UNISCHED_CURL_MEMBER(name) decltype(&::name) name = nullptr;
  UNISCHED_CURL_FUNCTIONS(UNISCHED_CURL_MEMBER)
#undef UNISCHED_CURL_MEMBER
};

Result<CurlApi> LoadCurl() {
  auto opened = posix::OpenSharedLibrary({"libcurl.so.4"}, RTLD_NOW | RTLD_LOCAL, "libcurl",
                                         "install it: apt-get install libcurl4 (Debian)");
  if (!opened.ok()) return opened.error();
  void* handle = *opened;
  CurlApi api;
  bool all = true;
#define UNISCHED_CURL_FIND(name) all = posix::FindSymbol(handle, api.name, #name) && all;
  UNISCHED_CURL_FUNCTIONS(UNISCHED_CURL_FIND)
#undef UNISCHED_CURL_FIND
  if (!all) return Error::Unavailable(std::string("the libcurl loaded lacks a function: ") + ::dlerror());
  // Once per process, before any handle (libcurl's rule).
  if (const CURLcode code = api.curl_global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
    return Error::Unavailable(std::string("libcurl did not start: ") + api.curl_easy_strerror(code));
  }
  return api;
}

// Loaded once (a static's initialisation is thread-safe); every later call
// gives the same answer. Only code holding a handle may use Curl()->
// without checking ok().
const Result<CurlApi>& Curl() {
  static const Result<CurlApi> api = LoadCurl();
  return api;
}

struct CurlFree {
  void operator()(CURL* c) const { Curl()->curl_easy_cleanup(c); }
};
struct SlistFree {
  void operator()(curl_slist* l) const { Curl()->curl_slist_free_all(l); }
};
struct MdFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Md = std::unique_ptr<EVP_MD_CTX, MdFree>;

Md NewMd5() {
  Md md(EVP_MD_CTX_new());
  if (md) EVP_DigestInit_ex(md.get(), EVP_md5(), nullptr);
  return md;
}

std::string FinishMd5(EVP_MD_CTX* md, bool base64) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(md, digest, &n);
  if (base64) {
    unsigned char out[64];
    const int len = EVP_EncodeBlock(out, digest, static_cast<int>(n));
    return std::string(reinterpret_cast<char*>(out), static_cast<size_t>(len));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

// The MD5 of bytes [offset, offset + size) of `fd`, base64 (Content-MD5).
Result<std::string> Md5OfRange(int fd, int64_t offset, int64_t size) {
  Md md = NewMd5();
  std::vector<char> buf(1 << 20);
  while (size > 0) {
    const ssize_t n = ::pread(fd, buf.data(), static_cast<size_t>(std::min<int64_t>(size, buf.size())), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Internal(std::string("cannot read the file to upload: ") + std::strerror(errno));
    EVP_DigestUpdate(md.get(), buf.data(), static_cast<size_t>(n));
    offset += n;
    size -= n;
  }
  return FinishMd5(md.get(), true);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// Whether an (unquoted) ETag is taken for its object's MD5: a single-part
// upload's is; a multipart upload's ("<md5 of the parts' md5s>-<parts>")
// tells nothing a download could check. (An object encrypted with SSE-C or
// SSE-KMS has 32 hex digits that are not its MD5: its download would be
// refused; docs/data.md, "Not yet".)
bool IsContentMd5(const std::string& etag) {
  return etag.size() == 32 && std::all_of(etag.begin(), etag.end(),
                                          [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

const char* Text(const tinyxml2::XMLElement* parent, const char* name) {
  const tinyxml2::XMLElement* e = parent ? parent->FirstChildElement(name) : nullptr;
  return e && e->GetText() ? e->GetText() : "";
}

bool Retryable(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_READ_ERROR:
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string UriEncode(const std::string& text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

struct S3Client::Request {
  // `method` on bucket/key?query, named so in messages ("HEAD s3 b/k").
  static Request For(std::string method, const std::string& bucket, const std::string& key, std::string query = {}) {
    Request req;
    req.what = method + " s3 " + bucket + (key.empty() ? "" : "/" + key);
    req.method = std::move(method);
    req.bucket = bucket;
    req.key = key;
    req.query = std::move(query);
    return req;
  }
  std::string method = "GET";
  std::string bucket, key;
  std::string query;  // canonical: keys sorted, values UriEncoded
  std::vector<std::string> headers;
  std::string body;  // POST's
  // PUT from a file range (in_fd >= 0), GET into a file (out_fd >= 0).
  int in_fd = -1;
  int64_t in_offset = 0;
  int64_t in_size = 0;
  int out_fd = -1;
  const Progress* progress = nullptr;
  std::string what;  // "PUT bucket/key", for messages
};

struct S3Client::Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;                            // unless it went to out_fd
  std::string md5_hex;                         // of what went to out_fd
  int64_t bytes = 0;                           // moved by the successful attempt
  int retries = 0;
};

S3Client::S3Client(S3Endpoint endpoint, S3Options options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)) {
  while (!endpoint_.url.empty() && endpoint_.url.back() == '/') endpoint_.url.pop_back();
}

std::string S3Client::Url(const std::string& bucket, const std::string& key, const std::string& query) const {
  std::string url;
  if (endpoint_.path_style || bucket.empty()) {
    url = endpoint_.url + "/" + bucket;
  } else {
    const size_t scheme = endpoint_.url.find("://");
    const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    url = endpoint_.url.substr(0, host) + bucket + "." + endpoint_.url.substr(host);
  }
  if (!key.empty()) url += "/" + UriEncode(key, true);
  if (!query.empty()) url += "?" + query;
  return url;
}

Result<S3Client::Response> S3Client::SendOnce(Request& req) const {
  if (!Curl().ok()) return Curl().error();
  const CurlApi& lib = *Curl();
  std::unique_ptr<CURL, CurlFree> curl(lib.curl_easy_init());
  if (!curl) return Error::Internal("s3: no curl handle");
  CURL* c = curl.get();
  Response response;
  const std::string url = Url(req.bucket, req.key, req.query);
  const std::string sigv4 = "aws:amz:" + endpoint_.region + ":s3";
  const std::string userpwd = endpoint_.access_key + ":" + endpoint_.secret_key;
  lib.curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  lib.curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  lib.curl_easy_setopt(c, CURLOPT_USERPWD, userpwd.c_str());
  lib.curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  lib.curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options_.connect_timeout.count()));
  lib.curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(options_.request_timeout.count()));
  lib.curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  lib.curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_time.count()));
  if (!endpoint_.ca_file.empty()) lib.curl_easy_setopt(c, CURLOPT_CAINFO, endpoint_.ca_file.c_str());

  std::unique_ptr<curl_slist, SlistFree> headers;
  auto add_header = [&headers, &lib](const std::string& h) {
    headers.reset(lib.curl_slist_append(headers.release(), h.c_str()));
  };
  // The payload's hash is not computed (a streamed body): integrity comes
  // from Content-MD5, which the server checks.
  add_header("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  // (No "Expect:" to turn 100-continue off: libcurl 7.88 signs the headers
  // it is given, that one too, and then does not send it.)
  for (const auto& h : req.headers) add_header(h);

  // What the server sends: headers, then the body, into out_fd (its MD5
  // kept) when the answer is a success, else into response.body.
  struct Sink {
    CURL* curl;
    Request* req;
    Response* response;
    Md md5;
    int64_t reported = 0;
    bool failed_write = false;
    // Hash the body only when the ETag (a header, so known before the
    // body) is its MD5: for a multipart object the digest would be thrown
    // away, and it is most of a download's CPU (docs/benchmarks.md, staging).
    std::optional<bool> hashing;
  } sink{c, &req, &response, req.out_fd >= 0 ? NewMd5() : Md(), 0, false, std::nullopt};
  auto on_header = +[](char* data, size_t size, size_t n, void* user) -> size_t {
    auto* s = static_cast<Sink*>(user);
    std::string line(data, size * n);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
      s->response->headers[Lower(line.substr(0, colon))] = value;
    }
    return size * n;
  };
  auto on_body = +[](char* data, size_t size, size_t n, void* user) -> size_t {
    auto* s = static_cast<Sink*>(user);
    const size_t len = size * n;
    long status = 0;
    Curl()->curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (s->req->out_fd < 0 || status < 200 || status >= 300) {
      if (s->response->body.size() < (1 << 20)) s->response->body.append(data, len);
      return len;
    }
    size_t left = len;
    const char* p = data;
    while (left > 0) {
      const ssize_t w = ::write(s->req->out_fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        s->failed_write = true;
        return 0;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    if (!s->hashing) {
      const auto etag = s->response->headers.find("etag");
      s->hashing = etag != s->response->headers.end() && IsContentMd5(Unquote(etag->second));
      if (!*s->hashing) s->md5.reset();
    }
    if (*s->hashing) EVP_DigestUpdate(s->md5.get(), data, len);
    s->response->bytes += static_cast<int64_t>(len);
    if (s->req->progress && *s->req->progress) (*s->req->progress)(static_cast<int64_t>(len));
    s->reported += static_cast<int64_t>(len);
    return len;
  };
  lib.curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  lib.curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
  lib.curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  lib.curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);

  // What goes up: a file range, streamed.
  struct Source {
    Request* req;
    int64_t offset;
    int64_t left;
    int64_t sent = 0;
  } source{&req, req.in_offset, req.in_size};
  auto on_read = +[](char* buf, size_t size, size_t n, void* user) -> size_t {
    auto* s = static_cast<Source*>(user);
    const size_t want = static_cast<size_t>(std::min<int64_t>(s->left, static_cast<int64_t>(size * n)));
    if (want == 0) return 0;
    ssize_t got;
    do got = ::pread(s->req->in_fd, buf, want, s->offset);
    while (got < 0 && errno == EINTR);
    if (got <= 0) return CURL_READFUNC_ABORT;
    s->offset += got;
    s->left -= got;
    s->sent += got;
    if (s->req->progress && *s->req->progress) (*s->req->progress)(got);
    return static_cast<size_t>(got);
  };

  // Larger buffers than libcurl's defaults (16 KiB in, 64 KiB out): fewer
  // callbacks and system calls per GiB (docs/benchmarks.md, staging).
  lib.curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
  if (req.method == "PUT") {
    lib.curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
    lib.curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    lib.curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.in_fd >= 0 ? req.in_size : 0));
    lib.curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    lib.curl_easy_setopt(c, CURLOPT_READDATA, &source);
    if (req.in_fd < 0) source.left = 0;
  } else if (req.method == "POST") {
    lib.curl_easy_setopt(c, CURLOPT_POST, 1L);
    lib.curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.c_str());
    lib.curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "HEAD") {
    lib.curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    lib.curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  lib.curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  if (options_.cancelled != nullptr) {
    // Called about once a second and at every chunk: non-zero aborts.
    lib.curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    lib.curl_easy_setopt(c, CURLOPT_XFERINFODATA, options_.cancelled);
    lib.curl_easy_setopt(
        c, CURLOPT_XFERINFOFUNCTION, +[](void* flag, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
          return static_cast<const std::atomic<bool>*>(flag)->load() ? 1 : 0;
        });
  }

  const CURLcode code = lib.curl_easy_perform(c);
  // What this attempt reported goes back when it is retried.
  const int64_t moved = source.sent + sink.reported;
  if (code != CURLE_OK) {
    if (moved > 0 && req.progress && *req.progress) (*req.progress)(-moved);
    if (sink.failed_write) {
      return Error::Internal(req.what + ": cannot write the downloaded data: " + std::strerror(errno));
    }
    if (code == CURLE_ABORTED_BY_CALLBACK) {
      return Error{ErrorKind::kUnavailable, "s3_cancelled", req.what + ": cancelled", {}};
    }
    Error e = Error::Unavailable(req.what + ": " + lib.curl_easy_strerror(code) + " (" + url + ")");
    e.code = Retryable(code) ? "s3_unreachable" : "s3_transfer_failed";
    return e;
  }
  lib.curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  if ((response.status == 429 || response.status >= 500) && moved > 0 && req.progress && *req.progress) {
    (*req.progress)(-moved);
  }
  if (req.in_fd >= 0) response.bytes = source.sent;
  if (sink.md5) response.md5_hex = FinishMd5(sink.md5.get(), false);
  return response;
}

Result<S3Client::Response> S3Client::Send(Request& req) const {
  thread_local std::mt19937 jitter(std::random_device{}());
  for (int attempt = 1;; ++attempt) {
    if (req.out_fd >= 0) {
      // A retried download starts over.
      if (::ftruncate(req.out_fd, 0) != 0 || ::lseek(req.out_fd, 0, SEEK_SET) != 0) {
        return Error::Internal(req.what + ": cannot rewind the download: " + std::strerror(errno));
      }
    }
    auto r = SendOnce(req);
    bool retry = false;
    if (!r.ok()) {
      retry = r.error().code == "s3_unreachable";
    } else {
      retry = r->status == 429 || r->status >= 500;
    }
    if (options_.cancelled != nullptr && options_.cancelled->load()) retry = false;
    if (retry && attempt < options_.max_attempts) {
      // Exponential backoff, full jitter: a crowd of clients spreads out.
      const int64_t cap = options_.backoff.count() << std::min(attempt - 1, 10);
      std::uniform_int_distribution<int64_t> pick(cap / 2, cap);
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(jitter)));
      continue;
    }
    if (!r.ok()) {
      Error e = r.error();
      if (attempt > 1) e.message += " (after " + std::to_string(attempt) + " attempts)";
      return e;
    }
    r->retries = attempt - 1;
    if (r->status >= 200 && r->status < 300) return r;
    if (req.method == "HEAD" && r->status == 404) return r;
    // S3's error document: <Error><Code>...</Code><Message>...</Message></Error>.
    tinyxml2::XMLDocument doc;
    std::string code = "HTTP" + std::to_string(r->status), message;
    if (!r->body.empty() && doc.Parse(r->body.data(), r->body.size()) == tinyxml2::XML_SUCCESS) {
      const tinyxml2::XMLElement* e = doc.FirstChildElement("Error");
      if (*Text(e, "Code")) code = Text(e, "Code");
      message = Text(e, "Message");
    }
    const std::string text =
        req.what + ": " + std::to_string(r->status) + " " + code + (message.empty() ? "" : " (" + message + ")");
    const ErrorKind kind = r->status == 404                       ? ErrorKind::kNotFound
                           : r->status == 403                     ? ErrorKind::kForbidden
                           : r->status >= 500 || r->status == 429 ? ErrorKind::kUnavailable
                                                                  : ErrorKind::kUnprocessable;
    return Error{kind, "s3_" + code, text, {}};
  }
}

Status S3Client::CreateBucket(const std::string& bucket) const {
  Request req = Request::For("PUT", bucket, "");
  auto r = Send(req);
  if (!r.ok()) return r.error();
  return Status::Ok();
}

Result<std::vector<ObjectInfo>> S3Client::List(const std::string& bucket, const std::string& prefix) const {
  std::vector<ObjectInfo> objects;
  std::string token;
  for (;;) {
    // Keys in byte order, as SigV4's canonical query has them.
    Request req = Request::For("GET", bucket, "",
                               (token.empty() ? "" : "continuation-token=" + UriEncode(token, false) + "&") +
                                   "list-type=2&prefix=" + UriEncode(prefix, false));
    req.what = "list s3 bucket " + bucket + " prefix '" + prefix + "'";
    auto r = Send(req);
    if (!r.ok()) return r.error();
    tinyxml2::XMLDocument doc;
    if (doc.Parse(r->body.data(), r->body.size()) != tinyxml2::XML_SUCCESS) {
      return Error::Unavailable(req.what + ": the answer is not XML");
    }
    const tinyxml2::XMLElement* result = doc.FirstChildElement("ListBucketResult");
    if (!result) return Error::Unavailable(req.what + ": the answer is not a ListBucketResult");
    for (const auto* item = result->FirstChildElement("Contents"); item; item = item->NextSiblingElement("Contents")) {
      ObjectInfo info;
      info.key = Text(item, "Key");
      info.size = std::strtoll(Text(item, "Size"), nullptr, 10);
      info.etag = Unquote(Text(item, "ETag"));
      info.last_modified = Text(item, "LastModified");
      objects.push_back(std::move(info));
    }
    if (std::string(Text(result, "IsTruncated")) != "true") break;
    token = Text(result, "NextContinuationToken");
    if (token.empty()) break;
  }
  return objects;
}

Result<std::optional<ObjectInfo>> S3Client::Head(const std::string& bucket, const std::string& key) const {
  Request req = Request::For("HEAD", bucket, key);
  auto r = Send(req);
  if (!r.ok()) return r.error();
  if (r->status == 404) return std::optional<ObjectInfo>();
  ObjectInfo info;
  info.key = key;
  info.size = std::strtoll(r->headers["content-length"].c_str(), nullptr, 10);
  info.etag = Unquote(r->headers["etag"]);
  info.last_modified = r->headers["last-modified"];
  return std::optional<ObjectInfo>(std::move(info));
}

Status S3Client::Delete(const std::string& bucket, const std::string& key) const {
  Request req = Request::For("DELETE", bucket, key);
  auto r = Send(req);
  if (!r.ok()) return r.error();
  return Status::Ok();
}

Result<TransferStats> S3Client::Upload(const std::string& bucket, const std::string& key, const std::string& file,
                                       const Progress& progress) const {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::Unprocessable("cannot_read", "cannot open " + file + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::Unprocessable("cannot_read", file + " is not a regular file");
  }
  const int64_t size = st.st_size;
  if (size > options_.multipart_threshold && size > options_.part_bytes) {
    ::close(fd);
    return UploadParts(bucket, key, file, size, progress);
  }
  auto md5 = Md5OfRange(fd, 0, size);
  if (!md5.ok()) {
    ::close(fd);
    return md5.error();
  }
  Request req = Request::For("PUT", bucket, key);
  req.in_fd = fd;
  req.in_size = size;
  req.headers = {"Content-MD5: " + *md5, "Content-Type: application/octet-stream"};
  req.progress = &progress;
  auto r = Send(req);
  ::close(fd);
  if (!r.ok()) return r.error();
  TransferStats stats;
  stats.bytes = size;
  stats.retries = r->retries;
  stats.etag = Unquote(r->headers["etag"]);
  return stats;
}

Result<TransferStats> S3Client::UploadParts(const std::string& bucket, const std::string& key, const std::string& file,
                                            int64_t size, const Progress& progress) const {
  const std::string what = "multipart upload of s3 " + bucket + "/" + key;
  Request start = Request::For("POST", bucket, key, "uploads=");
  auto started = Send(start);
  if (!started.ok()) return started.error();
  tinyxml2::XMLDocument doc;
  std::string upload_id;
  if (doc.Parse(started->body.data(), started->body.size()) == tinyxml2::XML_SUCCESS) {
    upload_id = Text(doc.FirstChildElement("InitiateMultipartUploadResult"), "UploadId");
  }
  if (upload_id.empty()) return Error::Unavailable(what + ": the server gave no UploadId");
  const std::string id_query = "uploadId=" + UriEncode(upload_id, false);
  auto abort = [&] {
    Request req = Request::For("DELETE", bucket, key, id_query);
    req.what = "abort " + what;
    (void)Send(req);
  };

  const int parts = static_cast<int>((size + options_.part_bytes - 1) / options_.part_bytes);
  std::vector<std::string> etags(static_cast<size_t>(parts));
  std::atomic<int> next{0};
  std::atomic<int> retries{0};
  std::mutex error_mu;
  std::optional<Error> failure;
  auto worker = [&] {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::lock_guard lock(error_mu);
      if (!failure) failure = Error::Internal("cannot open " + file + ": " + std::strerror(errno));
      return;
    }
    for (int i; (i = next.fetch_add(1)) < parts;) {
      {
        std::lock_guard lock(error_mu);
        if (failure) break;
      }
      const int64_t offset = static_cast<int64_t>(i) * options_.part_bytes;
      const int64_t length = std::min(options_.part_bytes, size - offset);
      auto md5 = Md5OfRange(fd, offset, length);
      Result<Response> r = md5.ok() ? Result<Response>(Error::Internal("")) : Result<Response>(md5.error());
      if (md5.ok()) {
        // partNumber sorts before uploadId, as the canonical query needs.
        Request req = Request::For("PUT", bucket, key, "partNumber=" + std::to_string(i + 1) + "&" + id_query);
        req.in_fd = fd;
        req.in_offset = offset;
        req.in_size = length;
        req.headers = {"Content-MD5: " + *md5};
        req.progress = &progress;
        req.what = "PUT part " + std::to_string(i + 1) + " of s3 " + bucket + "/" + key;
        r = Send(req);
      }
      if (!r.ok() || r->headers["etag"].empty()) {
        std::lock_guard lock(error_mu);
        if (!failure)
          failure = r.ok() ? Error::Unavailable(what + ": part " + std::to_string(i + 1) + " has no ETag") : r.error();
        break;
      }
      retries += r->retries;
      etags[static_cast<size_t>(i)] = r->headers["etag"];
    }
    ::close(fd);
  };
  std::vector<std::thread> threads;
  const int workers = std::max(1, std::min(options_.parallel, parts));
  for (int t = 0; t < workers; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) {
    abort();
    return *failure;
  }
  std::string body = "<CompleteMultipartUpload>";
  for (int i = 0; i < parts; ++i) {
    body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[static_cast<size_t>(i)] +
            "</ETag></Part>";
  }
  body += "</CompleteMultipartUpload>";
  Request complete = Request::For("POST", bucket, key, id_query);
  complete.body = std::move(body);
  complete.headers = {"Content-Type: application/xml"};
  complete.what = "complete " + what;
  auto done = Send(complete);
  // S3 may answer 200 and put an <Error> in the body.
  tinyxml2::XMLDocument answer;
  std::string etag;
  if (done.ok() && answer.Parse(done->body.data(), done->body.size()) == tinyxml2::XML_SUCCESS) {
    if (const auto* err = answer.FirstChildElement("Error")) {
      abort();
      return Error::Unavailable(complete.what + ": " + Text(err, "Code") + " (" + Text(err, "Message") + ")");
    }
    etag = Unquote(Text(answer.FirstChildElement("CompleteMultipartUploadResult"), "ETag"));
  }
  if (!done.ok()) {
    abort();
    return done.error();
  }
  if (etag.empty()) {
    // Some servers (radosgw) leave the result's ETag empty: the object's own.
    if (auto head = Head(bucket, key); head.ok() && head->has_value()) etag = (*head)->etag;
  }
  TransferStats stats;
  stats.bytes = size;
  stats.parts = parts;
  stats.retries = retries + done->retries;
  stats.etag = etag;
  return stats;
}

Result<TransferStats> S3Client::Download(const std::string& bucket, const std::string& key, const std::string& file,
                                         const Progress& progress) const {
  const std::string temp = file + ".part-" + std::to_string(::getpid()) + "-" +
                           std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error::Internal("cannot create " + temp + ": " + std::strerror(errno));
  Request req = Request::For("GET", bucket, key);
  req.out_fd = fd;
  req.progress = &progress;
  auto r = Send(req);
  const bool synced = r.ok() && ::fsync(fd) == 0;
  ::close(fd);
  auto fail = [&](Error e) -> Result<TransferStats> {
    ::unlink(temp.c_str());
    return e;
  };
  if (!r.ok()) return fail(r.error());
  if (!synced) return fail(Error::Internal("cannot write " + temp + ": " + std::strerror(errno)));
  // The length always; the content when the ETag is its MD5 (one part).
  const auto length = r->headers.find("content-length");
  if (length != r->headers.end() && std::strtoll(length->second.c_str(), nullptr, 10) != r->bytes) {
    return fail(Error::Unavailable(req.what + ": got " + std::to_string(r->bytes) + " bytes of " + length->second));
  }
  const std::string etag = Unquote(r->headers["etag"]);
  if (IsContentMd5(etag) && Lower(etag) != r->md5_hex) {
    return fail(Error::Unavailable(req.what + ": the content's MD5 " + r->md5_hex + " is not its ETag " + etag));
  }
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    return fail(Error::Internal("cannot rename " + temp + " to " + file + ": " + std::strerror(errno)));
  }
  TransferStats stats;
  stats.bytes = r->bytes;
  stats.retries = r->retries;
  stats.etag = etag;
  return stats;
}

}  // namespace unisched::objectstore
