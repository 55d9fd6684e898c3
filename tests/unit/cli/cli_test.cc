// Tests of the client's pure parts: argv -> request body, flag and duration
// parsing, and the tables and error lines it prints. No server involved.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/format.h"
#include "cli/sbatch_args.h"
#include "cli/submit_args.h"

namespace unisched::cli {
namespace {

using nlohmann::json;

TEST(SubmitArgsTest, BuildsTheRequestBody) {
  struct Case {
    std::string name;
    std::vector<std::string> argv;
    json want;
  };
  const std::vector<Case> cases = {
      {"command only: kind defaults to hpc",
       {"--", "/bin/echo", "hello"},
       {{"workload", {{"kind", "hpc"}}}, {"command", {"/bin/echo", "hello"}}}},
      {"command without -- starts at the first word; its own flags stay its own",
       {"--cpus", "2", "python3", "train.py", "--cpus", "8"},
       {{"workload", {{"kind", "hpc"}}},
        {"resources", {{"cpus", 2}}},
        {"command", {"python3", "train.py", "--cpus", "8"}}}},
      {"every option",
       {"--name",       "sim-42",
        "--project",    "genomics",
        "--queue",      "hpc-precision",
        "--kind",       "ai-training",
        "--feature",    "precision=fp64",
        "--feature",    "gpu_memory_gb=80",
        "--nodes",      "2",
        "--cpus",       "4",
        "--memory-mb",  "4096",
        "--gpus",       "1",
        "--gpu-model",  "h100",
        "--walltime",   "3600",
        "--constraint", "interconnect=ib",
        "--env",        "KEY=value",
        "--env",        "EMPTY=",
        "--priority",   "-5",
        "--",           "/bin/sh",
        "-c",           "echo hello"},
       {{"name", "sim-42"},
        {"project", "genomics"},
        {"queue", "hpc-precision"},
        {"workload", {{"kind", "ai-training"}, {"precision", "fp64"}, {"gpu_memory_gb", 80}}},
        {"resources",
         {{"nodes", 2},
          {"cpus", 4},
          {"memory_mb", 4096},
          {"gpus", 1},
          {"gpu_model", "h100"},
          {"walltime_seconds", 3600}}},
        {"constraints", {{"interconnect", "ib"}}},
        {"env", {{"KEY", "value"}, {"EMPTY", ""}}},
        {"command", {"/bin/sh", "-c", "echo hello"}},
        {"priority", -5}}},
      {"--time HH:MM:SS and --opt=value spelling",
       {"--time=01:30:00", "--kind=agent", "--", "true"},
       {{"workload", {{"kind", "agent"}}}, {"resources", {{"walltime_seconds", 5400}}}, {"command", {"true"}}}},
      {"feature values: numbers only when plainly numeric",
       {"--feature", "ratio=1.5", "--feature", "padded=080", "--feature", "zero=0", "--feature", "neg=-3", "--feature",
        "version=1.2.3", "--feature", "flag=true", "--feature", "eq=a=b", "--", "x"},
       {{"workload",
         {{"kind", "hpc"},
          {"ratio", 1.5},
          {"padded", "080"},
          {"zero", 0},
          {"neg", -3},
          {"version", "1.2.3"},
          {"flag", "true"},
          {"eq", "a=b"}}},
        {"command", {"x"}}}},
      {"constraint values stay strings",
       {"--constraint", "gpu_memory_gb=80", "--", "x"},
       {{"workload", {{"kind", "hpc"}}}, {"constraints", {{"gpu_memory_gb", "80"}}}, {"command", {"x"}}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto req = ParseSubmit(c.argv);
    ASSERT_TRUE(req.ok()) << req.error().message;
    EXPECT_EQ(req->body, c.want) << req->body.dump();
    EXPECT_FALSE(req->wait);
    EXPECT_EQ(req->idempotency_key, "");
  }
}

TEST(SubmitArgsTest, WaitAndIdempotencyKeyAreNotPartOfTheBody) {
  auto req = ParseSubmit({"--wait", "--idempotency-key", "run-7", "--json", "--", "true"});
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_TRUE(req->wait);
  EXPECT_EQ(req->idempotency_key, "run-7");
  EXPECT_EQ(req->body, json({{"workload", {{"kind", "hpc"}}}, {"command", {"true"}}}));
  // The submit directory goes along as sbatch sends it, unless --env sets it.
  auto parsed = ParseArgs({"--", "true"}, SubmitFlags(), true);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(BuildSubmitRequest(*parsed, "/home/alice")->body["env"], json({{"SLURM_SUBMIT_DIR", "/home/alice"}}));
  auto own = ParseArgs({"--env", "SLURM_SUBMIT_DIR=/x", "--", "true"}, SubmitFlags(), true);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(BuildSubmitRequest(*own, "/home/alice")->body["env"], json({{"SLURM_SUBMIT_DIR", "/x"}}));
}

TEST(SubmitArgsTest, RejectsBadArgumentsAsUsageErrors) {
  struct Case {
    std::vector<std::string> argv;
    std::string message_contains;
  };
  const std::vector<Case> cases = {
      {{}, "needs a command"},
      {{"--cpus", "4"}, "needs a command"},
      {{"--"}, "needs a command"},
      {{"--cpus", "four", "--", "x"}, "--cpus must be a whole number, got 'four'"},
      {{"--memory-mb", "1.5", "--", "x"}, "--memory-mb must be a whole number"},
      {{"--kind", "gpu", "--", "x"}, "--kind must be one of hpc, ai-training, ai-inference, agent"},
      {{"--feature", "precision", "--", "x"}, "--feature takes KEY=VALUE"},
      {{"--feature", "kind=agent", "--", "x"}, "use --kind"},
      {{"--env", "=x", "--", "x"}, "--env takes KEY=VALUE"},
      {{"--time", "1h", "--", "x"}, "--time takes Slurm's formats"},
      {{"--time", "UNLIMITED", "--", "x"}, "unisched has no unlimited wall time"},
      {{"--time", "01:00:00", "--walltime", "60", "--", "x"}, "either --walltime or --time"},
      {{"--bogus", "--", "x"}, "unknown option '--bogus'"},
      {{"--cpus"}, "option '--cpus' needs a value"},
      {{"--name", "a", "--name", "b", "--", "x"}, "given more than once"},
      {{"--wait=yes", "--", "x"}, "takes no value"},
  };
  for (const auto& c : cases) {
    std::string joined;
    for (const auto& w : c.argv) joined += w + " ";
    SCOPED_TRACE(joined);
    auto req = ParseSubmit(c.argv);
    ASSERT_FALSE(req.ok());
    EXPECT_TRUE(IsUsageError(req.error()));
    EXPECT_NE(req.error().message.find(c.message_contains), std::string::npos) << req.error().message;
  }
}

// `unisched sbatch` with its script, standard input and surroundings given.
struct Sbatch {
  std::map<std::string, std::string> files;
  std::string stdin_text;
  model::SubmitContext context;

  Result<SbatchRequest> Build(const std::vector<std::string>& words) const {
    SbatchSurroundings io;
    io.read_script = [this](const std::string& path) -> Result<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return Error::BadRequest("unreadable_script", "cannot read the script " + path);
      return it->second;
    };
    io.read_stdin = [this]() -> Result<std::string> { return stdin_text; };
    io.context = context;
    return BuildSbatchRequest(words, io);
  }
};

TEST(SbatchArgsTest, BuildsTheBodyFromTheDirectivesAndTheCommandLineOverThem) {
  Sbatch sbatch;
  const std::string script =
      "#!/bin/bash\n"
      "#SBATCH -J sim -p hpc-precision -A genomics\n"
      "#SBATCH -N 2 --ntasks-per-node=4 -c 2 --mem-per-cpu=1G\n"
      "#SBATCH --gres=gpu:a100:1 -t 1-12 -o slurm-%j.out -e slurm-%j.err\n"
      "#SBATCH --constraint=interconnect=ib --no-requeue --export=NONE\n"
      "srun ./sim\n";
  sbatch.files["job.sh"] = script;
  sbatch.context.directory = "/home/alice";
  auto req = sbatch.Build({"-t", "30", "--kind", "ai-training", "--idempotency-key", "k-1", "job.sh", "in.dat", "-v"});
  ASSERT_TRUE(req.ok()) << req.error().message;
  const json want = {
      {"name", "sim"},
      {"queue", "hpc-precision"},
      {"project", "genomics"},
      {"workload", {{"kind", "ai-training"}}},
      {"resources",
       {{"nodes", 2},
        {"tasks_per_node", 4},
        {"cpus", 8},
        {"memory_mb", 8192},
        {"gpus", 1},
        {"gpu_model", "a100"},
        {"walltime_seconds", 1800}}},  // -t 30 on the command line: 30 minutes
      {"constraints", {{"interconnect", "ib"}}},
      {"output_file", "slurm-%j.out"},
      {"error_file", "slurm-%j.err"},
      {"env", {{"SLURM_SUBMIT_DIR", "/home/alice"}}},
      {"max_retries", 0},
      {"script", script},
      {"command", {"job.sh", "in.dat", "-v"}},  // the script's name and its own arguments
  };
  EXPECT_EQ(req->body, want) << req->body.dump();
  EXPECT_EQ(req->idempotency_key, "k-1");
  EXPECT_EQ(req->script_name, "job.sh");
  EXPECT_FALSE(req->parsable || req->wait);
  std::vector<std::string> lines = SbatchWarningLines(req->script_name, req->warnings);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("unisched sbatch: warning: job.sh: line 5: --no-requeue: the job is never retried", 0), 0u)
      << lines[0];
}

TEST(SbatchArgsTest, WrapStandardInputArraysDependenciesAndTheClientsOwnOptions) {
  Sbatch sbatch;
  sbatch.context.environment = std::map<std::string, std::string>{
      {"HOME", "/home/alice"}, {"UNISCHED_TOKEN", "t0k3n"}, {"UNISCHED_URL", "http://x"}, {"API_TOKEN", "s3cr3t"}};
  auto wrapped = sbatch.Build({"--wrap", "hostname", "--parsable", "-W", "--array=0-9%2", "-d", "afterok:12:13",
                               "--url", "http://127.0.0.1:1", "--json"});
  ASSERT_TRUE(wrapped.ok()) << wrapped.error().message;
  EXPECT_EQ(wrapped->body.at("script"),
            "#!/bin/sh\n# This script was created by unisched sbatch --wrap.\n\nhostname\n");
  EXPECT_EQ(wrapped->body.at("command"), json({"wrap"}));
  EXPECT_EQ(wrapped->body.at("name"), "wrap");  // sbatch's default names
  EXPECT_EQ(wrapped->body.at("array"), json({{"indices", "0-9"}, {"max_running", 2}}));
  EXPECT_EQ(wrapped->body.at("dependency"), "afterok:12:13");
  // --export=ALL (sbatch's default) copies the environment without the
  // client's URL and token or anything like a credential.
  EXPECT_EQ(wrapped->body.at("env"), json({{"HOME", "/home/alice"}}));
  EXPECT_FALSE(wrapped->body.contains("workload"));  // the server gives it its queue's kind
  EXPECT_TRUE(wrapped->parsable && wrapped->wait);
  EXPECT_EQ(wrapped->args.Get("url"), "http://127.0.0.1:1");
  EXPECT_TRUE(wrapped->args.Has("json"));

  sbatch.stdin_text = "#!/usr/bin/env python3\n#SBATCH -J from-stdin\nprint(1)\n";
  auto piped = sbatch.Build({"-t", "5"});
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  EXPECT_EQ(piped->body.at("name"), "from-stdin");
  EXPECT_EQ(piped->body.at("command"), json({"stdin"}));
  EXPECT_EQ(piped->script_name, "standard input");
  sbatch.stdin_text = "#!/bin/sh\ntrue\n";
  auto unnamed = sbatch.Build({});
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().message;
  EXPECT_EQ(unnamed->body.at("name"), "sbatch");
  sbatch.files["/home/alice/runs/noname.sh"] = "#!/bin/sh\ntrue\n";
  auto from_file = sbatch.Build({"/home/alice/runs/noname.sh"});
  ASSERT_TRUE(from_file.ok()) << from_file.error().message;
  EXPECT_EQ(from_file->body.at("name"), "noname.sh");

  auto help = sbatch.Build({"--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->args.Has("help"));
}

TEST(SbatchArgsTest, RefusalsNameTheScriptLineOrTheOption) {
  Sbatch sbatch;
  sbatch.files["job.sh"] = "#!/bin/sh\n#SBATCH --mem=lots\ntrue\n";
  sbatch.files["plain.sh"] = "echo no shebang\n";
  struct Case {
    std::vector<std::string> words;
    bool usage;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"job.sh"}, false, "job.sh: line 2: --mem=lots: 'lots' is not a size"},
      {{"--mem=2G", "job.sh"}, true, ""},  // the command line's --mem replaces the bad one: accepted
      {{"plain.sh"}, false, "plain.sh: line 1: a batch script starts with #!"},
      {{"missing.sh"}, false, "cannot read the script missing.sh"},
      {{"--bogus", "job.sh"}, true, "unknown option '--bogus'"},
      {{"--wrap", "true", "job.sh"}, true, "either a script or --wrap"},
      {{"-t", "soon", "--mem=1G", "job.sh"}, false, "-t soon: 'soon' is not a time"},
      {{"--kind", "gpu", "--mem=1G", "job.sh"}, true, "--kind must be one of"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.words.front());
    auto req = sbatch.Build(c.words);
    if (c.says.empty()) {
      EXPECT_TRUE(req.ok()) << req.error().message;
      continue;
    }
    ASSERT_FALSE(req.ok());
    EXPECT_EQ(IsUsageError(req.error()), c.usage) << req.error().message;
    EXPECT_NE(req.error().message.find(c.says), std::string::npos) << req.error().message;
  }
}

TEST(ArgsTest, ParsesFlagsPositionalsAndRest) {
  const std::vector<FlagSpec> specs = {{"state", true, false}, {"stderr", false, false}};
  auto parsed = ParseArgs({"42", "--state", "PENDING", "--stderr", "--json", "--url=http://h:1", "-h", "43"}, specs);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->positionals, (std::vector<std::string>{"42", "43"}));
  EXPECT_EQ(parsed->Get("state"), "PENDING");
  EXPECT_EQ(parsed->Get("url"), "http://h:1");
  EXPECT_TRUE(parsed->Has("stderr"));
  EXPECT_TRUE(parsed->Has("json"));
  EXPECT_TRUE(parsed->Has("help"));
  EXPECT_FALSE(parsed->Has("token-file"));
  EXPECT_EQ(parsed->Get("token-file"), std::nullopt);
  EXPECT_TRUE(parsed->rest.empty());

  auto with_rest = ParseArgs({"--json", "--", "--state", "x"}, specs);
  ASSERT_TRUE(with_rest.ok());
  EXPECT_EQ(with_rest->rest, (std::vector<std::string>{"--state", "x"}));

  auto single_dash = ParseArgs({"-x"}, specs);
  ASSERT_FALSE(single_dash.ok());
  EXPECT_TRUE(IsUsageError(single_dash.error()));
}

TEST(ArgsTest, ShortNamesAreTheirLongFlags) {
  const std::vector<FlagSpec> specs = {{"follow", false, false, 'f'}, {"output", true, false, 'o'}};
  auto parsed = ParseArgs({"-f", "7", "-o", "slurm-%j.out"}, specs);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->Has("follow"));
  EXPECT_EQ(parsed->Get("output"), "slurm-%j.out");
  EXPECT_EQ(parsed->positionals, (std::vector<std::string>{"7"}));
  auto missing = ParseArgs({"-o"}, specs);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().field, "output");
  auto unknown = ParseArgs({"-e"}, specs);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'-e'"), std::string::npos);
}

TEST(ArgsTest, SlurmsJoinedShortFormsAliasesAndHeaderlessH) {
  const std::vector<FlagSpec> specs = {{"allocations", false, false, 'X'},
                                       {"parsable2", false, false, 'P'},
                                       {"noheader", false, false, 'n'},
                                       {"state", true, true, 's', {"states"}},
                                       {"header-off", false, false, 'h'}};
  auto parsed = ParseArgs({"-XPn", "-sPD,R", "--states=F", "-h"}, specs);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->Has("allocations") && parsed->Has("parsable2") && parsed->Has("noheader"));
  EXPECT_EQ(parsed->All("state"), (std::vector<std::string>{"PD,R", "F"}));
  EXPECT_TRUE(parsed->Has("header-off"));  // the command's -h, not help
  EXPECT_FALSE(parsed->Has("help"));
  auto help = ParseArgs({"-h"}, {{"state", true, false, 's'}});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->Has("help"));
  auto unknown = ParseArgs({"-Xq"}, specs);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'-q'"), std::string::npos) << unknown.error().message;
}

TEST(ArgsTest, ParsesDurations) {
  struct Case {
    std::string text;
    std::optional<int64_t> want;
  };
  // Every format of Slurm's --time (model::ParseSlurmTime has the full
  // table); zero and unlimited are refused: a job's wall time is bounded.
  const std::vector<Case> cases = {
      {"01:30:00", 5400},
      {"00:00:01", 1},
      {"100:00:00", 360000},
      {"1-00:00:00", 86400},
      {"2-03:04:05", 183845},
      {"1:2:3", 3723},
      {"90", 5400},
      {"01:30", 90},
      {"0:05", 5},
      {"2-12", 216000},
      {"2-03:04", 183840},
      {"01:60:00", 7200},
      {"00:00:00", std::nullopt},
      {"0", std::nullopt},
      {"UNLIMITED", std::nullopt},
      {"", std::nullopt},
      {"a:b:c", std::nullopt},
      {"01:30:00:00", std::nullopt},
      {"-01:00:00", std::nullopt},
      {"1-", std::nullopt},
      {" 01:00:00", std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseDuration(c.text);
    if (c.want) {
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_EQ(*got, *c.want);
      EXPECT_EQ(ParseDuration(FormatDuration(*c.want)).value(), *c.want);  // round trip
    } else {
      EXPECT_FALSE(got.ok());
    }
  }
}

TEST(ArgsTest, ParsesIntegers) {
  EXPECT_EQ(ParseInteger("42", "cpus").value(), 42);
  EXPECT_EQ(ParseInteger("-7", "priority").value(), -7);
  EXPECT_EQ(ParseInteger("+3", "priority").value(), 3);
  for (const char* bad : {"", "4x", "x4", "1.0", " 1", "99999999999999999999", "+"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseInteger(bad, "cpus").ok());
  }
}

TEST(ArgsTest, BuildsQueryStrings) {
  EXPECT_EQ(BuildQuery({}), "");
  EXPECT_EQ(BuildQuery({{"state", ""}, {"queue", ""}}), "");
  EXPECT_EQ(BuildQuery({{"state", "PENDING"}, {"queue", ""}, {"user", "a b&c"}}), "?state=PENDING&user=a%20b%26c");
  EXPECT_EQ(UrlEncode("x-1_2.3~/?"), "x-1_2.3~%2F%3F");
}

TEST(ArgsTest, ResolvesUrlAndTokenWithFlagsBeforeEnvironment) {
  std::map<std::string, std::string> env_vars;
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env_vars.find(name);
    return it == env_vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto files = [](const std::string& path) -> Result<std::string> {
    if (path == "tok") return std::string("  secret-from-file\n");
    if (path == "blank") return std::string("\n");
    return Error::BadRequest("unreadable_file", "cannot read token file " + path);
  };
  auto resolve = [&](std::vector<std::string> argv) {
    return ResolveConnection(ParseArgs(argv, {}).value(), env, files);
  };

  auto defaults = resolve({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->url, "http://127.0.0.1:8642");
  EXPECT_EQ(defaults->token, "");

  env_vars = {{"UNISCHED_URL", "http://10.0.0.1:9000"}, {"UNISCHED_TOKEN", "secret-from-env"}};
  auto from_env = resolve({});
  EXPECT_EQ(from_env->url, "http://10.0.0.1:9000");
  EXPECT_EQ(from_env->token, "secret-from-env");

  auto from_flags = resolve({"--url", "http://127.0.0.1:1", "--token-file", "tok"});
  EXPECT_EQ(from_flags->url, "http://127.0.0.1:1");
  EXPECT_EQ(from_flags->token, "secret-from-file");

  EXPECT_FALSE(resolve({"--token-file", "missing"}).ok());
  EXPECT_FALSE(resolve({"--token-file", "blank"}).ok());
}

TEST(FormatTest, TableAlignsColumns) {
  const std::string got = FormatTable({"ID", "NAME", "STATE"}, {{"1", "a-long-name", "RUNNING"}, {"12", "b", ""}});
  EXPECT_EQ(got,
            "ID  NAME         STATE\n"
            "1   a-long-name  RUNNING\n"
            "12  b\n");
  EXPECT_EQ(FormatTable({"A", "B"}, {}), "A  B\n");
}

TEST(FormatTest, CellsAndDurations) {
  EXPECT_EQ(CellText(json(nullptr)), "-");
  EXPECT_EQ(CellText(json("")), "-");
  EXPECT_EQ(CellText(json(4)), "4");
  EXPECT_EQ(CellText(json(true)), "true");
  EXPECT_EQ(CellText(json::array({"n1", "n2"})), "n1,n2");
  EXPECT_EQ(CellText(json::array()), "-");
  EXPECT_EQ(CellText(json({{"arch", "x86"}, {"ib", true}})), "arch=x86,ib=true");
  EXPECT_EQ(FormatDuration(5400), "01:30:00");
  EXPECT_EQ(FormatDuration(59), "00:00:59");
  EXPECT_EQ(FormatDuration(90061), "1-01:01:01");
  EXPECT_EQ(ShortTime(json("2026-12-02T13:23:25.123Z")), "2026-12-02 13:23:25");
  EXPECT_EQ(ShortTime(json(nullptr)), "-");
  EXPECT_EQ(ShellJoin(json::array({"/bin/sh", "-c", "echo 'hi' there"})), "/bin/sh -c 'echo '\\''hi'\\'' there'");
  EXPECT_EQ(ShellJoin(json::array({"a=b", ""})), "a=b ''");
}

TEST(FormatTest, ApiErrorLines) {
  struct Case {
    int status;
    std::string body;
    std::string want;
  };
  const std::vector<Case> cases = {
      {422,
       R"({"error":{"code":"unsatisfiable","message":"no node of gpu-train-pool has 16 GPUs","field":"resources.gpus"}})",
       "error: no node of gpu-train-pool has 16 GPUs (field: resources.gpus)"},
      {404, R"({"error":{"code":"not_found","message":"no job 9"}})", "error: no job 9"},
      {409, R"({"error":{"code":"conflict","message":"job 3 has ended","field":""}})", "error: job 3 has ended"},
      {502, "Bad Gateway\nmore", "error: HTTP 502: Bad Gateway"},
      {500, "", "error: HTTP 500"},
      {400, R"({"message":"not our shape"})", R"(error: HTTP 400: {"message":"not our shape"})"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(FormatApiError(c.status, c.body), c.want);
  }
  EXPECT_NE(HintForStatus(401).find("UNISCHED_TOKEN"), std::string::npos);
  EXPECT_EQ(HintForStatus(404), "");
}

TEST(FormatTest, ConnectionErrorNamesTheUrlAndTheFix) {
  const std::string text = FormatConnectionError("http://127.0.0.1:8642", "connection_failed", "Connection refused");
  EXPECT_NE(text.find("cannot reach the unisched daemon at http://127.0.0.1:8642 (Connection refused)"),
            std::string::npos);
  EXPECT_NE(text.find("unisched server"), std::string::npos);
  EXPECT_NE(text.find("UNISCHED_URL"), std::string::npos);
  EXPECT_NE(FormatConnectionError("u", "timeout", "m").find("no answer"), std::string::npos);
}

json SampleJob() {
  return json::parse(R"({
    "id": "42", "name": "train", "user": "alice", "project": "ml", "queue": "ai-training",
    "pool": "gpu-train-pool", "state": "PENDING", "state_reason": "",
    "workload": {"kind": "ai-training", "gpu_memory_gb": "80"},
    "resources": {"nodes": 1, "cpus": 8, "memory_mb": 65536, "gpus": 4, "gpu_model": "", "walltime_seconds": 7200},
    "constraints": {}, "command": ["python3", "train.py"], "env": {}, "priority": 1250,
    "priority_factors": {"fairshare": 0, "age": 250, "tier": 1000, "size": 0, "adjustment": 0},
    "estimated_start": "2026-01-01T02:00:00.000Z", "predicted_run_seconds": 1800,
    "routing": {"pool": "gpu-train-pool", "queue": "ai-training", "reason": "kind ai-training -> ai-training"},
    "nodes": [], "exit_code": null,
    "pending_reasons": [{"code": "Resources", "message": "needs 4 GPUs, 2 free in gpu-train-pool"},
                        {"code": "Priority", "message": "job 7 is ahead"}],
    "attempts": [{"attempt": 1, "nodes": ["gpu-01"], "started_at": "2026-01-01T00:00:00.000Z",
                  "ended_at": "2026-01-01T00:01:00.000Z", "state": "NODE_FAIL", "exit_code": null, "reason": "NodeFail"}],
    "submitted_at": "2026-01-01T00:00:00.000Z", "started_at": null, "ended_at": null
  })");
}

TEST(FormatTest, JobDetailShowsRoutingAttemptsAndEachPendingReason) {
  const std::string text = FormatJobDetail(SampleJob());
  for (const char* line : {
           "ID:          42\n",
           "State:       PENDING\n",
           "Routing:     kind ai-training -> ai-training\n",
           "Workload:    ai-training (gpu_memory_gb=80)\n",
           "Resources:   nodes=1 cpus=8 memory_mb=65536 gpus=4 walltime=02:00:00\n",
           "Command:     python3 train.py\n",
           "Nodes:       -\n",
           "Exit code:   -\n",
           "Priority:    1250 (fairshare 0 + age 250 + tier 1000 + size 0 + adjustment 0)\n",
           "Est. start:  2026-01-01 02:00:00\n",
           "Predicted:   00:30:00 (of 02:00:00 requested)\n",
           "Attempts:    1\n",
           "  #1 NODE_FAIL on gpu-01, 2026-01-01 00:00:00 .. 2026-01-01 00:01:00 (NodeFail)\n",
           "Pending reasons:\n  Resources: needs 4 GPUs, 2 free in gpu-train-pool\n  Priority: job 7 is ahead\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
  }

  json done = SampleJob();
  done["state"] = "FAILED";
  done["state_reason"] = "NonZeroExit";
  done["exit_code"] = 3;
  done["nodes"] = {"gpu-01", "gpu-02"};
  done["pending_reasons"] = json::array();
  const std::string done_text = FormatJobDetail(done);
  EXPECT_NE(done_text.find("State:       FAILED (NonZeroExit)\n"), std::string::npos) << done_text;
  EXPECT_NE(done_text.find("Exit code:   3\n"), std::string::npos);
  EXPECT_NE(done_text.find("Nodes:       gpu-01,gpu-02\n"), std::string::npos);
  EXPECT_EQ(done_text.find("Pending reasons"), std::string::npos);
  EXPECT_EQ(done_text.find("Script:"), std::string::npos);  // a command, no batch script

  json batch = SampleJob();
  batch["command"] = {"train.sh", "--epochs", "3"};
  batch["script"] = "#!/bin/bash\n#SBATCH -J train\nsrun python3 train.py\n";
  batch["workdir"] = "/scratch/alice";
  const std::string batch_text = FormatJobDetail(batch);
  EXPECT_NE(batch_text.find("Command:     train.sh --epochs 3\n"), std::string::npos) << batch_text;
  EXPECT_NE(batch_text.find("Script:      #!/bin/bash (3 lines; --json shows it)\n"), std::string::npos) << batch_text;
  EXPECT_NE(batch_text.find("Workdir:     /scratch/alice\n"), std::string::npos) << batch_text;
}

TEST(FormatTest, ListTables) {
  json jobs = {{"jobs", {SampleJob()}}, {"total", 1}, {"next_cursor", nullptr}};
  EXPECT_EQ(FormatJobsTable(jobs),
            "ID  NAME   USER   PROJECT  QUEUE        POOL            STATE    NODES  SUBMITTED\n"
            "42  train  alice  ml       ai-training  gpu-train-pool  PENDING  -      2026-01-01 00:00:00\n");

  json nodes = json::parse(R"({"nodes": [{"name": "gpu-01", "pool": "gpu-train-pool", "labels": {"gpu": "h100"},
      "state": "up", "reason": "", "resources": {"cpus": 32, "memory_mb": 1024, "gpus": [{"index": 0}, {"index": 1}]},
      "allocated": {"cpus": 8, "memory_mb": 512, "gpus": [1]}, "last_heartbeat": null}]})");
  EXPECT_EQ(FormatNodesTable(nodes),
            "NAME    POOL            STATE  CPUS  MEMORY_MB  GPUS  REASON  LABELS\n"
            "gpu-01  gpu-train-pool  up     8/32  512/1024   1/2   -       gpu=h100\n");

  json queues = json::parse(R"({"queues": [{"name": "agent-sandbox", "pool": "elastic-light-pool",
      "policy": {"type": "fifo", "preemptible": false, "max_concurrency": 64}, "pending": 2, "running": 5}]})");
  EXPECT_EQ(
      FormatQueuesTable(queues),
      "NAME           POOL                POLICY  PREEMPTIBLE  MAX_WALLTIME_H  MAX_CONCURRENCY  PENDING  RUNNING\n"
      "agent-sandbox  elastic-light-pool  fifo    false        -               64               2        5\n");

  json pools = json::parse(R"({"pools": [{"name": "cpu-hpc-pool", "kind": "cpu", "labels": {},
      "nodes": ["a", "b"], "capacity": {"cpus": 128, "memory_mb": 2048, "gpus": 0},
      "allocated": {"cpus": 4, "memory_mb": 0, "gpus": 0}}]})");
  EXPECT_EQ(FormatPoolsTable(pools),
            "NAME          KIND  NODES  CPUS   MEMORY_MB  GPUS  LABELS\n"
            "cpu-hpc-pool  cpu   2      4/128  0/2048     0/0   -\n");

  json events = json::parse(R"({"events": [{"time": "2026-01-01T00:00:00.000Z", "kind": "submitted",
      "message": "routed"}]})");
  EXPECT_EQ(FormatEventsTable(events),
            "TIME                 KIND       MESSAGE\n"
            "2026-01-01 00:00:00  submitted  routed\n");

  EXPECT_EQ(FormatJobsTable(json::object()), "ID  NAME  USER  PROJECT  QUEUE  POOL  STATE  NODES  SUBMITTED\n");
}

TEST(FormatTest, WhoAmI) {
  json who = {{"user", "admin"}, {"role", "platform-admin"}, {"projects", json::array()}, {"queues", json::array()}};
  EXPECT_EQ(FormatWhoAmI(who), "User:     admin\nRole:     platform-admin\nProjects: -\n");
}

}  // namespace
}  // namespace unisched::cli
