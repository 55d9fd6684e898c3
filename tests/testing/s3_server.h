#pragma once
// The S3 server of the test run (radosgw, the s3_server fixture of
// tests/CMakeLists.txt): where it is and its credentials, and curl's own
// SigV4 as an independent client of it. Header-only: the S3 client's tests
// use it without the rest of tests/testing.

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace unisched::testing {

// UNISCHED_TEST_S3_URL, _ACCESS and _SECRET from the fixture's env file
// (its directory in UNISCHED_TEST_S3_DIR); empty when not run by ctest.
inline std::map<std::string, std::string> S3ServerEnv() {
  std::map<std::string, std::string> env;
  const char* dir = std::getenv("UNISCHED_TEST_S3_DIR");
  if (dir == nullptr) return env;
  std::ifstream in(std::string(dir) + "/env");
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

// How the data tests give a daemon the fixture's keys: an object store's
// `credentials` naming two secrets of project default, and the bodies of
// the two POST /v1/secrets that hold the keys (hex: no JSON escaping needed).
inline constexpr const char* kS3CredentialsYaml =
    "credentials: {project: default, access_key: s3-access, secret_key: s3-secret}";
inline std::vector<std::string> S3KeySecretBodies(const std::map<std::string, std::string>& env) {
  auto body = [&](const char* name, const char* key) {
    auto it = env.find(key);
    return std::string(R"({"project":"default","name":")") + name + R"(","value":")" +
           (it == env.end() ? std::string() : it->second) + "\"}";
  };
  return {body("s3-access", "UNISCHED_TEST_S3_ACCESS"), body("s3-secret", "UNISCHED_TEST_S3_SECRET")};
}

// curl --aws-sigv4 against the server, its files under `scratch`.
class S3Curl {
 public:
  S3Curl(std::map<std::string, std::string> env, std::string scratch)
      : env_(std::move(env)), scratch_(std::move(scratch)) {}

  const std::string& url() { return env_["UNISCHED_TEST_S3_URL"]; }
  // curl with `args` (the body into <scratch>.body); its HTTP status, or "curl failed".
  std::string Run(const std::string& args) {
    const std::string status = scratch_ + ".status";
    const std::string cmd = "curl -s --aws-sigv4 'aws:amz:us-east-1:s3' --user '" + env_["UNISCHED_TEST_S3_ACCESS"] +
                            ":" + env_["UNISCHED_TEST_S3_SECRET"] +
                            "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -w '%{http_code}' -o " + scratch_ +
                            ".body " + args + " > " + status;
    const std::string code = std::system(cmd.c_str()) == 0 ? Slurp(status) : "curl failed";
    std::remove(status.c_str());
    return code;
  }
  std::string MakeBucket(const std::string& bucket) { return Run("-X PUT '" + url() + "/" + bucket + "'"); }
  std::string Put(const std::string& bucket, const std::string& key, const std::string& content) {
    const std::string file = scratch_ + ".upload";
    std::ofstream(file, std::ios::binary) << content;
    std::string code = Run("-T " + file + " '" + url() + "/" + bucket + "/" + key + "'");
    std::remove(file.c_str());
    return code;
  }
  // The object's content, or "" with its status in `status`.
  std::string Get(const std::string& bucket, const std::string& key, std::string* status = nullptr) {
    const std::string code = Run("'" + url() + "/" + bucket + "/" + key + "'");
    if (status) *status = code;
    std::string body = code == "200" ? Slurp(scratch_ + ".body") : std::string();
    std::remove((scratch_ + ".body").c_str());
    return body;
  }

 private:
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::map<std::string, std::string> env_;
  std::string scratch_;
};

}  // namespace unisched::testing
