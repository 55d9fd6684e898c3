// Slurm batch scripts and sbatch's options (model/batch_script.h), as
// tables of cases: the time and memory formats, how directives are read,
// how options map onto the job body, what is refused and what is warned.

#include "unisched/model/batch_script.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace unisched::model {
namespace {

// The request of `script`'s directives with `command_line` over them.
Result<BatchRequest> Resolve(const std::string& script, const std::vector<std::string>& command_line = {},
                             const SubmitContext& context = {}) {
  BatchOptions options;
  if (Status s = ReadBatchScript(script, options); !s.ok()) return s.error();
  BatchOptions later;
  auto read = ReadBatchCommandLine(command_line, {}, later);
  if (!read.ok()) return read.error();
  for (auto& [setting, value] : later.settings) options.settings[setting] = value;
  return ResolveBatchOptions(options, context);
}

std::string Script(const std::string& directives) {
  return "#!/bin/bash\n" + directives + "\necho hello\n";
}

// Whether one of `warnings` says `part`.
bool Warns(const BatchRequest& r, const std::string& part) {
  for (const auto& w : r.warnings) {
    if (w.Text().find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(SlurmTimeTest, ReadsEveryFormatSlurmDoes) {
  struct Case {
    const char* text;
    std::optional<int64_t> seconds;
  };
  const Case cases[] = {
      {"5", 300},                     // minutes
      {"90", 5400},                   // minutes beyond an hour
      {"0:05", 5},                    // minutes:seconds
      {"1:30", 90},                   //
      {"90:00", 5400},                // fields are not bounded, as in Slurm
      {"01:30:00", 5400},             // hours:minutes:seconds
      {"1:2:3", 3723},                //
      {"100:00:00", 360000},          //
      {"1:90:00", 9000},              //
      {"2-12", 216000},               // days-hours
      {"1-0", 86400},                 //
      {"2-03:04", 183840},            // days-hours:minutes
      {"2-03:04:05", 183845},         // days-hours:minutes:seconds
      {"0:0:0", 0},                   // zero: no limit in Slurm (the callers refuse or warn)
      {"UNLIMITED", kUnlimitedTime},  //
      {"infinite", kUnlimitedTime},   //
      {"-1", kUnlimitedTime},         //
      {"", std::nullopt},             //
      {"1h", std::nullopt},           //
      {"1:2:3:4", std::nullopt},      //
      {"1-2:3:4:5", std::nullopt},    //
      {"1-", std::nullopt},           //
      {"-5", std::nullopt},           //
      {"1-2-3", std::nullopt},        //
      {"1:-2", std::nullopt},         //
      {"1::2", std::nullopt},         //
      {":30", std::nullopt},          //
      {" 5", std::nullopt},           //
      {"1.5", std::nullopt},          //
      {"9999999999999", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(ParseSlurmTime(c.text), c.seconds);
  }
}

TEST(SlurmWhenTest, ReadsSlurmsPointsInTimeAsOfNow) {
  const Timestamp now = *ParseRfc3339("2026-12-07T10:20:30Z");
  struct Case {
    const char* text;
    const char* at;  // RFC 3339; nullptr: malformed
  };
  const Case cases[] = {
      {"now", "2026-12-07T10:20:30Z"},
      {"now+1hour", "2026-12-07T11:20:30Z"},
      {"now+90", "2026-12-07T10:22:00Z"},  // seconds without a unit
      {"now-2days", "2026-12-05T10:20:30Z"},
      {"NOW+1Week", "2026-12-14T10:20:30Z"},
      {"today", "2026-12-07T00:00:00Z"},
      {"midnight", "2026-12-07T00:00:00Z"},
      {"noon", "2026-12-07T12:00:00Z"},
      {"tomorrow", "2026-12-08T00:00:00Z"},
      {"16:00", "2026-12-07T16:00:00Z"},
      {"06:51:05", "2026-12-07T06:51:05Z"},
      {"2026-12-24", "2026-12-24T00:00:00Z"},
      {"2026-12-24T08:00", "2026-12-24T08:00:00Z"},
      {"2026-12-24T08:00:09", "2026-12-24T08:00:09Z"},
      {"2026-12-24T08:00:00+02:00", "2026-12-24T06:00:00Z"},
      {"1224", "2026-12-24T00:00:00Z"},
      {"122427", "2027-12-24T00:00:00Z"},
      {"12/24", "2026-12-24T00:00:00Z"},
      {"12/24/27", "2027-12-24T00:00:00Z"},
      {"now+1fortnight", nullptr},
      {"now+", nullptr},
      {"25:00", nullptr},
      {"2026-13-01", nullptr},
      {"2026-12-24T8:00", nullptr},
      {"soon", nullptr},
      {"", nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const auto got = ParseSlurmWhen(c.text, now);
    if (c.at == nullptr) {
      EXPECT_FALSE(got.has_value()) << FormatRfc3339(*got);
    } else {
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(*got, *ParseRfc3339(c.at));
    }
  }
}

TEST(SlurmMemoryTest, ReadsUnitsAndDefaultsToMegabytes) {
  struct Case {
    const char* text;
    std::optional<int64_t> mb;
  };
  const Case cases[] = {
      {"4096", 4096},
      {"4096M", 4096},
      {"4096m", 4096},
      {"4G", 4096},
      {"1g", 1024},
      {"2T", 2 << 20},
      {"1024K", 1},
      {"1K", 1},
      {"1025K", 2},
      {"0", 0},
      {"", std::nullopt},
      {"G", std::nullopt},
      {"4GB", std::nullopt},
      {"1.5G", std::nullopt},
      {"-1G", std::nullopt},
      {"4X", std::nullopt},
      {"2000000T", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(ParseSlurmMemoryMb(c.text), c.mb);
  }
}

TEST(BatchScriptTest, ReadsDirectivesInEveryFormUntilTheFirstCommand) {
  const std::string script =
      "#!/bin/bash\n"
      "# a comment\n"
      "\n"
      "#SBATCH --job-name=sim\n"
      "#SBATCH -p hpc-precision   # the queue\n"
      "#SBATCH --account genomics\n"
      "#SBATCH -t 0:05 --mem=1G\n"
      "   # an indented comment\n"
      " #SBATCH -J indented-is-a-comment\n"
      "#SBATCH -o \"out %j.log\" -e 'err-%j.log'\n"
      "#SBATCHX -J not-a-directive\n"
      "module load gcc\n"
      "#SBATCH --nodes=4\n"
      "srun ./sim\n";
  BatchOptions options;
  ASSERT_TRUE(ReadBatchScript(script, options).ok());
  auto r = ResolveBatchOptions(options, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "sim");
  EXPECT_EQ(r->queue, "hpc-precision");
  EXPECT_EQ(r->project, "genomics");
  EXPECT_EQ(r->walltime_seconds, 5);
  EXPECT_EQ(r->memory_mb, 1024);
  EXPECT_EQ(r->output_file, "out %j.log");
  EXPECT_EQ(r->error_file, "err-%j.log");
  EXPECT_EQ(r->nodes, std::nullopt);  // after the first command: not read ...
  ASSERT_EQ(r->warnings.size(), 1u);  // ... but said
  EXPECT_EQ(r->warnings[0].source.line, 13);
  EXPECT_NE(r->warnings[0].message.find("after the first command (line 12)"), std::string::npos)
      << r->warnings[0].message;
  // Each field remembers its directive, for the server's refusals.
  EXPECT_EQ(r->sources.at("resources.memory_mb"), (OptionSource{7, "--mem=1G"}));
  EXPECT_EQ(r->sources.at("name").Where(), "line 4: --job-name=sim");
}

TEST(BatchScriptTest, RefusesWhatIsNotABatchScriptNamingTheLine) {
  struct Case {
    std::string script;
    const char* says;
  };
  const Case cases[] = {
      {"", "empty"},
      {"echo hi\n", "line 1: a batch script starts with #!"},
      {"#!/bin/sh\r\necho hi\r\n", "line 1: the script has DOS line breaks"},
      {std::string("#!/bin/sh\necho \0\n", 16), "line 2: the script holds a NUL byte"},
      {"#!/bin/sh\necho \xe9t\xe9\n", "line 2: the script is not UTF-8"},
      {"#!/bin/sh\n#SBATCH -J \"open\n", "line 2: unmatched \""},
      {"#!/bin/sh\n#SBATCH --time\n", "line 2: --time needs a value"},
      {"#!/bin/sh\n#SBATCH --parsable=yes\n", "line 2: --parsable=yes: --parsable takes no value"},
      {"#!/bin/sh\n" + std::string(kMaxScriptBytes, '#'), "at most 524288"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    BatchOptions options;
    Status s = ReadBatchScript(c.script, options);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find(c.says), std::string::npos) << s.error().message;
    EXPECT_EQ(s.error().field, "script");
  }
}

TEST(BatchScriptTest, UnknownAndUnsupportedDirectivesAreWarningsNamingTheLine) {
  auto r =
      Resolve(Script("#SBATCH --mail-type=END --mail-user me@example.org\n"
                     "#SBATCH --frobnicate 3 -J sim\n"
                     "#SBATCH --qos=high -X\n"
                     "#SBATCH stray\n"
                     "#PBS -N old"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "sim");  // the rest of the line is still read
  std::vector<std::string> texts;
  for (const auto& w : r->warnings) texts.push_back(w.Text());
  ASSERT_EQ(texts.size(), 7u) << ::testing::PrintToString(texts);
  EXPECT_EQ(texts[0].rfind("line 2: --mail-type=END: unisched sends no mail", 0), 0u) << texts[0];
  EXPECT_EQ(texts[1].rfind("line 2: --mail-user me@example.org: unisched sends no mail", 0), 0u) << texts[1];
  EXPECT_EQ(texts[2], "line 3: --frobnicate 3: unknown option: ignored");
  EXPECT_EQ(texts[3].rfind("line 4: --qos=high: unisched has no QOS", 0), 0u) << texts[3];
  EXPECT_EQ(texts[4], "line 4: -X: unknown option: ignored");
  EXPECT_EQ(texts[5], "line 5: stray: not an option: ignored");
  EXPECT_EQ(texts[6], "line 6: #PBS -N old: PBS directives are not read; write them as #SBATCH");
}

TEST(BatchScriptTest, TheCommandLineWinsOverTheDirectives) {
  auto r = Resolve(Script("#SBATCH -J script-name -t 10 --mem=1G -n 4"), {"-J", "cli-name", "--mem-per-cpu=2G", "-c2"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "cli-name");
  EXPECT_EQ(r->walltime_seconds, 600);  // from the script
  EXPECT_EQ(r->cpus, 8);                // -n 4 from the script, -c 2 from the command line
  EXPECT_EQ(r->memory_mb, 2048 * 8);    // --mem-per-cpu replaced --mem (one setting)
  EXPECT_EQ(r->sources.at("name").line, 0);
}

TEST(BatchScriptTest, ReadsTheCommandLineUntilTheScript) {
  BatchOptions options;
  auto cl = ReadBatchCommandLine({"-N2", "--json", "--url", "http://x", "--time", "1:00:00", "job.sh", "-J", "arg"},
                                 {{"json", 0, false}, {"url", 0, true}}, options);
  ASSERT_TRUE(cl.ok()) << cl.error().message;
  EXPECT_EQ(cl->rest, (std::vector<std::string>{"job.sh", "-J", "arg"}));  // the script's own arguments
  EXPECT_EQ(cl->extras.at("url"), std::vector<std::string>{"http://x"});
  EXPECT_TRUE(cl->extras.count("json"));
  EXPECT_EQ(options.settings.at("nodes").value, "2");
  EXPECT_EQ(options.settings.at("time").source, (OptionSource{0, "--time 1:00:00"}));
  // On the command line an unknown option stops the submission.
  for (std::vector<std::string> words : {std::vector<std::string>{"--frobnicate", "job.sh"}, {"-X", "job.sh"}}) {
    BatchOptions o;
    auto bad = ReadBatchCommandLine(words, {}, o);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("unknown option"), std::string::npos) << bad.error().message;
  }
  BatchOptions o;
  auto missing = ReadBatchCommandLine({"-t"}, {}, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("needs a value"), std::string::npos) << missing.error().message;
  // A switch needs no value; "--" ends the options.
  BatchOptions s;
  auto switches = ReadBatchCommandLine({"--parsable", "-W", "--", "-job.sh"}, {}, s);
  ASSERT_TRUE(switches.ok());
  EXPECT_EQ(switches->rest, std::vector<std::string>{"-job.sh"});
  EXPECT_TRUE(s.settings.count("parsable") && s.settings.count("wait"));
}

// -N, -n, --ntasks-per-node and -c onto nodes, tasks per node and CPUs
// per node; --mem and --mem-per-cpu onto memory per node; the GPU options
// onto GPUs per node.
TEST(BatchScriptTest, MapsTheShapeOfTheJob) {
  struct Case {
    std::string directives;
    std::optional<int64_t> nodes, tasks_per_node, cpus, memory_mb, gpus;
    std::string gpu_model;
  };
  const std::optional<int64_t> none;
  const Case cases[] = {
      {"-c 4", none, none, 4, none, none, ""},
      {"-n 8", none, 8, 8, none, none, ""},
      {"-N 2 -n 8", 2, 4, 4, none, none, ""},
      {"-N 2 -n 8 -c 3", 2, 4, 12, none, none, ""},
      {"-n 8 --ntasks-per-node=4", 2, 4, 4, none, none, ""},
      {"-N 2 --ntasks-per-node=4 -c 2", 2, 4, 8, none, none, ""},
      {"-N 3-5", 3, none, none, none, none, ""},
      {"--mem=4G", none, none, none, 4096, none, ""},
      {"--mem=512", none, none, none, 512, none, ""},
      {"--mem=2048K", none, none, none, 2, none, ""},
      {"--mem=1T", none, none, none, 1 << 20, none, ""},
      {"--mem-per-cpu=1G", none, none, none, 1024, none, ""},
      {"--mem-per-cpu=1G -c 4", none, none, 4, 4096, none, ""},
      {"--mem-per-cpu=500M -n 4 -c 2", none, 4, 8, 4000, none, ""},
      {"--gres=gpu:2", none, none, none, none, 2, ""},
      {"--gres=gpu", none, none, none, none, 1, ""},
      {"--gres=gpu:a100:4", none, none, none, none, 4, "a100"},
      {"--gres=gpu:h100", none, none, none, none, 1, "h100"},
      {"--gres=none", none, none, none, none, 0, ""},
      {"--gpus-per-node=h100:2", none, none, none, none, 2, "h100"},
      {"-N 2 --gpus=8", 2, none, none, none, 4, ""},
      {"-G a100:2", none, none, none, none, 2, "a100"},
      {"--ntasks-per-node=4 --gpus-per-task=1", none, 4, 4, none, 4, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.directives);
    auto r = Resolve(Script("#SBATCH " + c.directives));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->nodes, c.nodes);
    EXPECT_EQ(r->tasks_per_node, c.tasks_per_node);
    EXPECT_EQ(r->cpus, c.cpus);
    EXPECT_EQ(r->memory_mb, c.memory_mb);
    EXPECT_EQ(r->gpus, c.gpus);
    EXPECT_EQ(r->gpu_model.value_or(""), c.gpu_model);
  }
}

TEST(BatchScriptTest, RefusesValuesNamingTheDirectiveAndAFix) {
  struct Case {
    const char* directives;
    const char* says;
  };
  const Case cases[] = {
      {"-t 1h", "line 2: -t 1h: '1h' is not a time; Slurm's formats: minutes"},
      {"--mem=lots", "line 2: --mem=lots: 'lots' is not a size"},
      {"--mem=4GB", "e.g. --mem=4G"},
      {"-N 0", "-N (nodes) must be a whole number from 1"},
      {"-N 3 -n 8", "-n 8 tasks do not divide evenly among 3 nodes"},
      {"-n 6 --ntasks-per-node=4", "-n 6 is not a multiple of --ntasks-per-node 4"},
      {"-N 2 -n 6 --ntasks-per-node=4", "-n 6 is not -N 2 x --ntasks-per-node 4"},
      {"-c x", "-c (CPUs per task) must be a whole number"},
      {"-N 2 --gpus=3", "3 GPUs do not divide evenly among 2 nodes"},
      {"--gres=gpu:a100:x", "the GPU count 'x' is not a whole number"},
      {"--gres=gpu:1,gpu:2", "gpu is named twice"},
      {"--gpus-per-node=a:b:1", "is not [MODEL:]COUNT"},
      {"-p a,b", "name one queue"},
      {"-o out-%q", "'out-%q' has an unknown pattern"},
      {"--array=5-1", "is not an array"},
      {"--array=1-10%0", "the cap after '%' must be a whole number from 1"},
      {"--export=NONE,A=1", "NONE takes nothing with it"},
      {"--export=1A=b", "'1A' is not a variable name"},
      {"--export=ALL,UNISCHED_TOKEN", "unisched's own variables are never passed to a job"},
      {"-C 'a|b'", "only all-of constraints are supported"},
      {"-D relative/dir", "is relative and the API has no submit directory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.directives);
    auto r = Resolve(Script(std::string("#SBATCH ") + c.directives));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().field, "script");
  }
}

TEST(BatchScriptTest, WarnsWhereItGivesLessThanSlurm) {
  struct Case {
    const char* directives;
    const char* says;
  };
  const Case cases[] = {
      {"-t UNLIMITED", "unisched has no unlimited wall time"},
      {"-t 0", "unisched has no unlimited wall time"},
      {"--mem=0", "--mem=0 (all of a node's memory) is not supported"},
      {"-N 2-4", "exact number of nodes: 2"},
      {"--gres=gpu:2,nvme:1", "GRES nvme is not supported"},
      {"--requeue", "as its queue's policy says"},
      {"--no-requeue", "never retried after a failure (max_retries 0)"},
      {"--exclusive", "exactly the CPUs, memory and GPUs it asks for"},
      {"--mem=1G\n#SBATCH --mem-per-cpu=1G", "line 3: --mem-per-cpu=1G: replaces line 2: --mem=1G"},
      {"--wrap=hostname", "only sbatch's command line takes --wrap"},
      {"--export=ALL", "POST /v1/jobs has no submitting environment"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.directives);
    auto r = Resolve(Script(std::string("#SBATCH ") + c.directives));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(Warns(*r, c.says)) << ::testing::PrintToString(r->warnings.size());
  }
}

TEST(BatchScriptTest, MapsTheRest) {
  SubmitContext context;
  context.directory = "/home/alice/runs";
  context.host = "login-1";
  auto r = Resolve(Script("#SBATCH --array=1-1000:2%50 -d afterok:12:13,afterany:14 -D out\n"
                          "#SBATCH -C 'interconnect=ib&fast' --no-requeue --parsable -W"),
                   {}, context);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->array, (BatchArray{"1-1000:2", 50}));
  EXPECT_EQ(r->dependency, "afterok:12:13,afterany:14");  // as written: the server reads Slurm's syntax
  EXPECT_EQ(r->workdir, "/home/alice/runs/out");          // relative to the submit directory
  EXPECT_EQ(r->constraints, (Labels{{"fast", "true"}, {"interconnect", "ib"}}));
  EXPECT_EQ(r->max_retries, 0);
  EXPECT_TRUE(r->parsable);
  EXPECT_TRUE(r->wait);
  ASSERT_TRUE(r->env);
  EXPECT_EQ(r->env->at("SLURM_SUBMIT_DIR"), "/home/alice/runs");
  EXPECT_EQ(r->env->at("SLURM_SUBMIT_HOST"), "login-1");
  for (const char* good : {"0-15", "1,3,5-9", "7", "0-100:10%1"}) {
    auto a = Resolve(Script(std::string("#SBATCH --array=") + good));
    EXPECT_TRUE(a.ok()) << good;
  }
}

// --export=ALL copies the submitting environment, but never unisched's
// own variables (its URL and token), the scheduler's, the shell session's
// or anything that looks like a credential; a named variable is the
// submitter's explicit choice.
TEST(BatchScriptTest, ExportAllNeverCopiesTokensOrCredentials) {
  SubmitContext context;
  context.environment = std::map<std::string, std::string>{
      {"PATH", "/opt/bin:/usr/bin"},
      {"OMP_PROC_BIND", "close"},
      {"UNISCHED_TOKEN", "secret-1"},
      {"UNISCHED_URL", "http://127.0.0.1:8642"},
      {"UNISCHED_ADMIN_TOKEN", "secret-2"},
      {"SLURM_JOB_ID", "7"},
      {"USER", "alice"},
      {"PWD", "/home/alice"},
      {"GITHUB_TOKEN", "secret-3"},
      {"AWS_SECRET_ACCESS_KEY", "secret-4"},
      {"AWS_ACCESS_KEY_ID", "id"},
      {"PGPASSWORD", "secret-5"},
      {"OPENAI_API_KEY", "secret-6"},
      {"SSH_AUTH_SOCK", "/tmp/agent.1"},
      {"MY_DB_PWD", "secret-7"},
      {"BASH_FUNC_f%%", "() { :; }"},
      {"LATIN1", "caf\xe9"},
  };
  for (const char* export_option : {"", "#SBATCH --export=ALL"}) {
    SCOPED_TRACE(export_option);
    auto r = Resolve(Script(export_option), {}, context);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->env);
    EXPECT_EQ(*r->env, (std::map<std::string, std::string>{{"PATH", "/opt/bin:/usr/bin"}, {"OMP_PROC_BIND", "close"}}));
    EXPECT_TRUE(Warns(*r,
                      "not copied, as they look like credentials: AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY,"
                      "GITHUB_TOKEN,MY_DB_PWD,OPENAI_API_KEY,PGPASSWORD,SSH_AUTH_SOCK"));
  }
  // NONE: nothing of it; a list alone: only those, named ones even when
  // they look like credentials; ALL and a list: both.
  auto none = Resolve(Script("#SBATCH --export=NONE"), {}, context);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none->env, (std::map<std::string, std::string>{}));
  auto list = Resolve(Script("#SBATCH --export=OMP_PROC_BIND,GITHUB_TOKEN,MODE=fast,UNSET"), {}, context);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list->env, (std::map<std::string, std::string>{
                            {"OMP_PROC_BIND", "close"}, {"GITHUB_TOKEN", "secret-3"}, {"MODE", "fast"}}));
  EXPECT_TRUE(Warns(*list, "UNSET is not set in the submitting environment"));
  auto both = Resolve(Script("#SBATCH --export=ALL,MODE=fast"), {}, context);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->env->at("MODE"), "fast");
  EXPECT_EQ(both->env->at("PATH"), "/opt/bin:/usr/bin");
  EXPECT_FALSE(both->env->count("UNISCHED_TOKEN"));
  // The rule, one name at a time.
  EXPECT_EQ(ExportRuleFor("UNISCHED_TOKEN", "x"), ExportRule::kUnisched);
  EXPECT_EQ(ExportRuleFor("unisched_token", "x"), ExportRule::kUnisched);
  EXPECT_EQ(ExportRuleFor("SBATCH_PARTITION", "x"), ExportRule::kScheduler);
  EXPECT_EQ(ExportRuleFor("LOGNAME", "x"), ExportRule::kSession);
  EXPECT_EQ(ExportRuleFor("HF_TOKEN", "x"), ExportRule::kCredential);
  EXPECT_EQ(ExportRuleFor("KRB5CCNAME", "x"), ExportRule::kCredential);
  EXPECT_EQ(ExportRuleFor("a-b", "x"), ExportRule::kNotAName);
  EXPECT_EQ(ExportRuleFor("HOME", "/home/alice"), ExportRule::kCopied);
}

TEST(BatchScriptTest, BodyFieldsGivenDropTheirDirectives) {
  BatchOptions options;
  ASSERT_TRUE(ReadBatchScript(Script("#SBATCH -J sim -D relative -n 4 --mem=oops -t 10"), options).ok());
  // As the server does for a body with these fields: the -D a client made
  // absolute and the --mem it replaced are neither resolved nor refused.
  DropSettingsGiven(options, [](std::string_view path) {
    return path == "workdir" || path == "resources.memory_mb" || path == "resources.tasks_per_node";
  });
  auto r = ResolveBatchOptions(options, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "sim");
  EXPECT_EQ(r->walltime_seconds, 600);
  EXPECT_EQ(r->cpus, 4);  // -n gives the CPUs too: kept while the body lacks them
  EXPECT_EQ(r->workdir, std::nullopt);
  EXPECT_EQ(r->memory_mb, std::nullopt);
}

}  // namespace
}  // namespace unisched::model
