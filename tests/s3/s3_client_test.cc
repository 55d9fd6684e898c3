// The S3 client (objectstore/s3.h) against a real S3 server that checks
// signatures: Ceph's radosgw, started for the run by tests/s3/radosgw.sh
// (the s3_server fixture). Signed requests with query parameters work, a
// wrong secret is refused, objects go up whole or in parallel parts and come
// back intact, an independent client (curl's own SigV4) reads what we wrote
// and we read what it wrote, and an unreachable server is retried, then
// reported.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "testing/s3_server.h"
#include "unisched/objectstore/s3.h"

namespace unisched::objectstore {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = unisched::testing::S3ServerEnv();
    ASSERT_TRUE(env_.count("UNISCHED_TEST_S3_URL"))
        << "no S3 server: run through ctest (the s3_server fixture, tests/s3/radosgw.sh)";
    endpoint_.url = env_["UNISCHED_TEST_S3_URL"];
    endpoint_.access_key = env_["UNISCHED_TEST_S3_ACCESS"];
    endpoint_.secret_key = env_["UNISCHED_TEST_S3_SECRET"];
    dir_ = fs::temp_directory_path() / ("unisched-s3-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    bucket_ = "t" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}() % 100000);
    const Status made = S3Client(endpoint_).CreateBucket(bucket_);
    ASSERT_TRUE(made.ok()) << made.error().message;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string RandomFile(const std::string& name, size_t bytes) {
    std::mt19937_64 rng(bytes);
    std::string data(bytes, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  // curl's own SigV4 (an independent client): the exit code, the HTTP status in `status`.
  int Curl(const std::string& args, std::string* status = nullptr) {
    const std::string out = dir_ + "/curl.status";
    const std::string cmd = "curl -s --aws-sigv4 'aws:amz:us-east-1:s3' --user '" + endpoint_.access_key + ":" +
                            endpoint_.secret_key + "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -w '%{http_code}' " +
                            args + " > " + out;
    const int rc = std::system(cmd.c_str());
    if (status) *status = Slurp(out);
    return rc;
  }

  std::map<std::string, std::string> env_;
  S3Endpoint endpoint_;
  std::string dir_, bucket_;
};

TEST_F(S3ClientTest, AWrongSecretIsRefusedByTheServer) {
  S3Endpoint wrong = endpoint_;
  wrong.secret_key += "x";
  auto listed = S3Client(wrong).List(bucket_, "");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, "s3_SignatureDoesNotMatch") << listed.error().message;
  EXPECT_EQ(listed.error().kind, ErrorKind::kForbidden);
  // The right one lists.
  EXPECT_TRUE(S3Client(endpoint_).List(bucket_, "").ok());
}

TEST_F(S3ClientTest, ASignedListingWithQueryParametersFindsKeysThatNeedEncoding) {
  const S3Client s3(endpoint_);
  const std::string file = RandomFile("small", 1000);
  for (const std::string key : {"in/a b.txt", "in/c+d=e&f", "in/sub/ü.dat", "out/x"}) {
    ASSERT_TRUE(s3.Upload(bucket_, key, file).ok()) << key;
  }
  auto in = s3.List(bucket_, "in/");
  ASSERT_TRUE(in.ok()) << in.error().message;
  std::vector<std::string> keys;
  for (const auto& o : *in) keys.push_back(o.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"in/a b.txt", "in/c+d=e&f", "in/sub/ü.dat"}));
  for (const auto& o : *in) EXPECT_EQ(o.size, 1000);
  EXPECT_EQ(s3.List(bucket_, "nothing/")->size(), 0u);
}

TEST_F(S3ClientTest, AnObjectGoesUpWholeAndComesBackIntact) {
  const S3Client s3(endpoint_);
  const std::string file = RandomFile("one", 3 << 20);
  int64_t progressed = 0;
  auto up = s3.Upload(bucket_, "data/one.bin", file, [&](int64_t n) { progressed += n; });
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->parts, 1);
  EXPECT_EQ(progressed, 3 << 20);
  auto head = s3.Head(bucket_, "data/one.bin");
  ASSERT_TRUE(head.ok() && head->has_value());
  EXPECT_EQ((*head)->size, 3 << 20);
  EXPECT_EQ((*head)->etag.size(), 32u);  // the MD5, as the download checks
  auto down = s3.Download(bucket_, "data/one.bin", dir_ + "/one.back");
  ASSERT_TRUE(down.ok()) << down.error().message;
  EXPECT_EQ(Slurp(dir_ + "/one.back"), Slurp(file));
  // What an independent client reads is the same.
  std::string status;
  Curl(endpoint_.url + "/" + bucket_ + "/data/one.bin -o " + dir_ + "/one.curl", &status);
  EXPECT_EQ(status, "200");
  EXPECT_EQ(Slurp(dir_ + "/one.curl"), Slurp(file));
}

TEST_F(S3ClientTest, ALargeObjectGoesUpInParallelPartsAndComesBackIntact) {
  S3Options options;
  options.part_bytes = 5 << 20;  // S3's smallest part
  options.multipart_threshold = 6 << 20;
  options.parallel = 3;
  const S3Client s3(endpoint_, options);
  const std::string file = RandomFile("big", (17 << 20) + 12345);
  int64_t progressed = 0;
  std::mutex mu;
  auto up = s3.Upload(bucket_, "data/big.bin", file, [&](int64_t n) {
    std::lock_guard lock(mu);
    progressed += n;
  });
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->parts, 4);
  EXPECT_EQ(progressed, (17 << 20) + 12345);
  EXPECT_NE(up->etag.find("-4"), std::string::npos) << up->etag;  // S3's multipart ETag
  auto down = s3.Download(bucket_, "data/big.bin", dir_ + "/big.back");
  ASSERT_TRUE(down.ok()) << down.error().message;
  EXPECT_EQ(down->bytes, (17 << 20) + 12345);
  EXPECT_EQ(Slurp(dir_ + "/big.back"), Slurp(file));
  // No part upload is left behind.
  std::string status;
  Curl(endpoint_.url + "/" + bucket_ + "?uploads= -o " + dir_ + "/uploads.xml", &status);
  EXPECT_EQ(status, "200");
  EXPECT_EQ(Slurp(dir_ + "/uploads.xml").find("<Upload>"), std::string::npos) << Slurp(dir_ + "/uploads.xml");
}

TEST_F(S3ClientTest, WhatAnIndependentClientWroteIsReadAndAMissingObjectIsNamed) {
  const std::string file = RandomFile("theirs", 70000);
  std::string status;
  Curl("-T " + file + " " + endpoint_.url + "/" + bucket_ + "/in/theirs.bin", &status);
  ASSERT_EQ(status, "200");
  const S3Client s3(endpoint_);
  auto down = s3.Download(bucket_, "in/theirs.bin", dir_ + "/theirs.back");
  ASSERT_TRUE(down.ok()) << down.error().message;
  EXPECT_EQ(Slurp(dir_ + "/theirs.back"), Slurp(file));
  auto missing = s3.Download(bucket_, "in/none.bin", dir_ + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "s3_NoSuchKey") << missing.error().message;
  EXPECT_NE(missing.error().message.find(bucket_ + "/in/none.bin"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/none"));  // nor a partial file
  auto head = s3.Head(bucket_, "in/none.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_FALSE(head->has_value());
  ASSERT_TRUE(s3.Delete(bucket_, "in/theirs.bin").ok());
  EXPECT_FALSE(s3.Head(bucket_, "in/theirs.bin")->has_value());
}

TEST(S3ClientRetryTest, AnUnreachableServerIsRetriedThenReported) {
  S3Endpoint nowhere;
  nowhere.url = "http://127.0.0.1:1";  // nothing listens
  nowhere.access_key = "a";
  nowhere.secret_key = "b";
  S3Options options;
  options.max_attempts = 3;
  options.backoff = std::chrono::milliseconds(10);
  auto listed = S3Client(nowhere, options).List("bucket", "");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, "s3_unreachable");
  EXPECT_EQ(listed.error().kind, ErrorKind::kUnavailable);
  EXPECT_NE(listed.error().message.find("after 3 attempts"), std::string::npos) << listed.error().message;
}

TEST(S3UrlTest, StoreBucketAndKeyOrAClearError) {
  auto url = ParseS3Url("s3://archive/results/run 7/", "data.stage_out[0].to");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->store, "archive");
  EXPECT_EQ(url->bucket, "results");
  EXPECT_EQ(url->key, "run 7/");
  for (const std::string bad : {"http://x/y", "s3://", "s3:///bucket", "s3://store", "s3://store/ab"}) {
    auto parsed = ParseS3Url(bad, "f");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().field, "f");
  }
  EXPECT_EQ(UriEncode("a b/ü+c", true), "a%20b/%C3%BC%2Bc");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
}

}  // namespace
}  // namespace unisched::objectstore
