// Data staging's pure rules (model/data_staging.h): store URLs, paths in the
// work directory, where objects land and which keys files get.

#include "unisched/model/data_staging.h"

#include <gtest/gtest.h>

#include <vector>

namespace unisched::model {
namespace {

TEST(StoreUrlTest, StoreBucketAndKeyOrAnErrorNamingTheField) {
  auto url = ParseStoreUrl("s3://rgw/genomics/samples/run 7/", "data.stage_in[0].from");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(*url, (StoreUrl{"rgw", "genomics", "samples/run 7/"}));
  EXPECT_EQ(ParseStoreUrl("s3://rgw/genomics", "f")->key, "");
  for (const std::string bad : {"https://rgw/b/k", "s3:///bucket/k", "s3://rgw", "s3://rgw/ab/k", "s3://rgw/"}) {
    auto parsed = ParseStoreUrl(bad, "data.stage_in[2].from");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().field, "data.stage_in[2].from");
    EXPECT_NE(parsed.error().message.find("s3://STORE/BUCKET/KEY-OR-PREFIX"), std::string::npos);
  }
}

TEST(WorkPathTest, RelativeBelowTheWorkDirectoryOnly) {
  for (const std::string ok : {"", ".", "input/", "input", "a/b/c.txt", "results.tar"}) {
    EXPECT_EQ(CheckWorkPath(ok), "") << ok;
  }
  for (const std::string& bad :
       std::vector<std::string>{"/etc", "../x", "a/../../x", "a//b", "./a", "a/./b", "..", std::string("a\0b", 3)}) {
    EXPECT_NE(CheckWorkPath(bad), "") << bad;
  }
}

TEST(StagePatternTest, JobIdAndAttemptAreReplacedEverywhere) {
  EXPECT_EQ(ExpandStagePattern("s3://rgw/b/results/{job_id}/{attempt}/{job_id}.log", 42, 3),
            "s3://rgw/b/results/42/3/42.log");
  EXPECT_EQ(ExpandStagePattern("s3://rgw/b/{jobid}/", 42, 3), "s3://rgw/b/{jobid}/");
}

TEST(StageInTargetTest, WhereEachObjectLands) {
  struct Case {
    std::string from_key, to, object_key, want;
  };
  const Case cases[] = {
      {"samples/", "input/", "samples/a.fq", "input/a.fq"},             // a prefix keeps the path below it
      {"samples/", "input", "samples/lane1/a.fq", "input/lane1/a.fq"},  // with or without the '/'
      {"samples/", "", "samples/a.fq", "a.fq"},                         // into the work directory itself
      {"", "in/", "x/y.txt", "in/x/y.txt"},                             // the whole bucket
      {"ref/genome.fa", "in/", "ref/genome.fa", "in/genome.fa"},        // one object into a directory
      {"ref/genome.fa", "", "ref/genome.fa", "genome.fa"},
      {"ref/genome.fa", "reference.fa", "ref/genome.fa", "reference.fa"},  // one object, renamed
      {"samples/", "input/", "samples/../../etc/passwd", ""},              // a key that is no path: refused
      {"samples/", "input/", "samples/a//b", ""},
      {"samples/", "input/", "other/a.fq", ""},  // not under the prefix
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StageInTarget({"rgw", "bucket", c.from_key}, c.to, c.object_key), c.want) << c.object_key;
  }
}

TEST(StageOutKeyTest, WhichKeyEachFileGets) {
  const StoreUrl prefix{"rgw", "b", "results/42/"};
  EXPECT_EQ(StageOutKey(prefix, "output/", "deep/x.txt"), "results/42/deep/x.txt");
  EXPECT_EQ(StageOutKey(prefix, "output/log.txt", ""), "results/42/log.txt");
  EXPECT_EQ(StageOutKey(prefix, "output/", ""), "results/42/output");
  const StoreUrl key{"rgw", "b", "results/42.tar"};
  EXPECT_EQ(StageOutKey(key, "out.tar", ""), "results/42.tar");
  EXPECT_EQ(StageOutKey(key, "dir/", "a.txt"), "results/42.tar/a.txt");
}

}  // namespace
}  // namespace unisched::model
