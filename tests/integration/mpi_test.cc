// Multi-node jobs across real node boundaries (issue 19, point 3): two
// `unisched agent` processes, each in a network and a UTS namespace of its
// own (its own address and hostname), their namespaces joined to the
// daemon's by veth pairs on a bridge. An MPI program built against Debian's
// OpenMPI runs across them, mpirun starting its remote daemon through
// `unisched step --rsh` (the job's own launcher, as srun is under Slurm);
// and a rendezvous job of plain Python sockets finds its ranks through the
// environment unisched gives them.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "testing/agent_process.h"
#include "testing/daemon.h"

namespace unisched::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const std::string kNodes[2] = {"x86-c2m1-mpi-01", "x86-c2m1-mpi-02"};

bool Shell(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// Two hosts on one machine: network namespaces with addresses 10.77.S.1 and
// .2, a bridge at 10.77.S.254 in the daemon's namespace, veth pairs between.
class TwoHosts {
 public:
  TwoHosts() {
    const int id = static_cast<int>(::getpid() % 200) + 20;
    subnet_ = "10.77." + std::to_string(id);
    bridge_ = "usbr" + std::to_string(::getpid() % 100000);
    ok_ = Shell("ip link add " + bridge_ + " type bridge") &&
          Shell("ip addr add " + subnet_ + ".254/24 dev " + bridge_) && Shell("ip link set " + bridge_ + " up");
    for (int i = 0; i < 2 && ok_; ++i) {
      const std::string ns = Netns(i), outside = "usv" + std::to_string(::getpid() % 100000) + "h" + std::to_string(i);
      ok_ = Shell("ip netns add " + ns) && Shell("ip link add " + outside + " type veth peer name eth0 netns " + ns) &&
            Shell("ip link set " + outside + " master " + bridge_) && Shell("ip link set " + outside + " up") &&
            Shell("ip netns exec " + ns + " ip addr add " + Address(i) + "/24 dev eth0") &&
            Shell("ip netns exec " + ns + " ip link set eth0 up") &&
            Shell("ip netns exec " + ns + " ip link set lo up");
      outside_.push_back(outside);
    }
  }
  ~TwoHosts() {
    for (int i = 0; i < 2; ++i) Shell("ip netns del " + Netns(i));
    for (const auto& v : outside_) Shell("ip link del " + v);
    Shell("ip link del " + bridge_);
  }
  bool ok() const { return ok_; }
  std::string Netns(int i) const { return "us" + std::to_string(::getpid()) + "n" + std::to_string(i); }
  std::string Address(int i) const { return subnet_ + "." + std::to_string(i + 1); }
  std::string Gateway() const { return subnet_ + ".254"; }
  std::string Subnet() const { return subnet_ + ".0/24"; }
  // Bytes the bridge has sent into host i's namespace over its veth.
  uint64_t BytesInto(int i) const {
    std::ifstream in("/sys/class/net/" + outside_.at(static_cast<size_t>(i)) + "/statistics/tx_bytes");
    uint64_t bytes = 0;
    in >> bytes;
    return bytes;
  }

 private:
  std::string subnet_, bridge_;
  std::vector<std::string> outside_;
  bool ok_ = false;
};

class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    if (!Shell("command -v ip") || !Shell("command -v mpicc")) {
      GTEST_SKIP() << "iproute2 or OpenMPI missing: scripts/install-deps.sh installs them";
    }
    hosts_ = std::make_unique<TwoHosts>();
    ASSERT_TRUE(hosts_->ok()) << "could not make the namespaces";
    shared_ = daemon_.state_dir() + "/shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);
    // Reached by the test on loopback, by the agents at the bridge's address.
    daemon_.SetServerArgs({"--listen", "0.0.0.0:0"});
    daemon_.UseConfigText(R"yaml(
server:
  scheduler_tick_seconds: 0.1
health:
  heartbeat_interval_seconds: 1
  heartbeat_timeout_seconds: 20
pools:
  - name: mpi
    kind: cpu
    nodes: [x86-c2m1-mpi-01, x86-c2m1-mpi-02]
nodes:
  - {name: x86-c2m1-mpi-01, cpus: 2, memory_mb: 1024, agent: true}
  - {name: x86-c2m1-mpi-02, cpus: 2, memory_mb: 1024, agent: true}
queues:
  - name: batch
    pool: mpi
    policy: {max_walltime_hours: 1}
projects:
  - name: default
)yaml");
    daemon_.Start();
    agents_ = std::make_unique<AgentFleet>(daemon_, "mpi", std::vector<std::string>{kNodes[0], kNodes[1]},
                                           std::vector<std::string>{hosts_->Netns(0), hosts_->Netns(1)},
                                           "http://" + hosts_->Gateway() + ":" + std::to_string(daemon_.port()));
    ASSERT_TRUE(daemon_.WaitNodes("up")) << "the agents did not register: " << daemon_.Call("GET", "/v1/nodes").body;
  }
  std::string AgentDir(const std::string& node) const { return agents_->Dir(node); }
  std::string Log(const std::string& id, const std::string& stream = "stdout") {
    return daemon_.Call("GET", "/v1/jobs/" + id + "/log?stream=" + stream).body;
  }
  // The output as its node keeps it (debugging a failure).
  std::string NodeLog(const std::string& node, const std::string& id, const std::string& stream) {
    std::ifstream in(AgentDir(node) + "/runs/" + id + "/1/" + stream);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::unique_ptr<TwoHosts> hosts_;
  TestDaemon daemon_;
  std::string shared_;
  std::unique_ptr<AgentFleet> agents_;  // gone before the daemon and the namespaces
};

// Each rank: its host name, its cgroup, and the sum over all ranks of rank+1.
constexpr const char* kAllreduce = R"c(
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, len = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(host, &len);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  char cgroup[512] = "";
  FILE* f = fopen("/proc/self/cgroup", "r");
  while (f && fgets(cgroup, sizeof cgroup, f)) {
    if (strstr(cgroup, "unisched")) break;
  }
  if (f) fclose(f);
  cgroup[strcspn(cgroup, "\n")] = 0;
  printf("rank %d of %d on %s sum %ld cgroup %s\n", rank, size, host, sum, cgroup);
  MPI_Finalize();
  return 0;
}
)c";

TEST_F(MpiTest, AnMpiAllreduceRunsAcrossTwoNodesThroughUnischedsLauncher) {
  { std::ofstream(shared_ + "/allreduce.c") << kAllreduce; }
  ASSERT_TRUE(Shell("mpicc -O1 -o " + shared_ + "/allreduce " + shared_ + "/allreduce.c")) << "mpicc failed";
  // mpirun's remote shell: unisched's own step launcher.
  {
    std::ofstream rsh(shared_ + "/rsh");
    rsh << "#!/bin/sh\nexec " << UNISCHED_BINARY << " step --rsh \"$@\"\n";
  }
  fs::permissions(shared_ + "/rsh", fs::perms::all);
  // Only TCP, only over the namespaces' veth network: the ranks can meet
  // nowhere else.
  // OpenMPI reads the allocation from the Slurm names unisched sets; it
  // starts its remote daemons with the rsh launcher (there is no srun).
  const std::string mpirun = "mpirun -np 2 --host " + kNodes[0] + ":1," + kNodes[1] +
                             ":1 --mca plm rsh --mca rtc_hwloc_vmhole none --mca plm_rsh_agent " + shared_ +
                             "/rsh --mca btl tcp,self --mca btl_tcp_if_include " + hosts_->Subnet() +
                             " --mca oob_tcp_if_include " + hosts_->Subnet() + " " + shared_ + "/allreduce";
  const std::string id = daemon_.Submit({{"queue", "batch"},
                                         {"workload", {{"kind", "hpc"}}},
                                         {"resources", {{"nodes", 2}, {"cpus", 1}, {"memory_mb", 256}}},
                                         {"env", {{"HOME", shared_}}},
                                         {"command", {"/bin/sh", "-c", mpirun}}});
  const json job = daemon_.WaitTerminal(id, 120s);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2) << "\nstdout:\n"
                                       << NodeLog(kNodes[0], id, "stdout") << "\nstderr:\n"
                                       << NodeLog(kNodes[0], id, "stderr");
  ASSERT_EQ(job["nodes"][0], kNodes[0]) << job.dump();
  // The output as the API serves it: shipped from the first node by its agent.
  EXPECT_EQ(Log(id), NodeLog(kNodes[0], id, "stdout"));
  std::istringstream lines(Log(id));
  std::map<int, std::string> hosts, cgroups;
  std::string line;
  while (std::getline(lines, line)) {
    int rank = -1, size = 0;
    long sum = 0;
    char host[256] = "", cgroup[512] = "";
    if (std::sscanf(line.c_str(), "rank %d of %d on %255s sum %ld cgroup %511[^\n]", &rank, &size, host, &sum,
                    cgroup) >= 4) {
      EXPECT_EQ(size, 2) << line;
      EXPECT_EQ(sum, 3) << line << ": the allreduce over ranks 0 and 1 of rank+1";
      hosts[rank] = host;
      cgroups[rank] = cgroup;
    }
  }
  ASSERT_EQ(hosts.size(), 2u) << NodeLog(kNodes[0], id, "stdout") << NodeLog(kNodes[0], id, "stderr");
  // Each rank on its own node (its UTS namespace's hostname is the node's name).
  EXPECT_EQ(hosts[0], kNodes[0]);
  EXPECT_EQ(hosts[1], kNodes[1]);
  // In that node's attempt cgroup: rank 0 in the batch script's, rank 1 in
  // its step's (task 65536 = step 1, rank 0), when cgroups are in use.
  if (!cgroups[0].empty() || !cgroups[1].empty()) {
    EXPECT_NE(cgroups[0].find(id + "-1-"), std::string::npos) << cgroups[0];
    EXPECT_NE(cgroups[1].find(id + "-1.65536-"), std::string::npos) << cgroups[1];
  }
}

// Launch check 6's cross-node figure across real node boundaries: the
// baseline's own MPI job (mpirun through `unisched step --rsh`, one rank a
// node) computes one product on the two namespaced nodes, B crossing the
// veth into the second node at every multiply.
TEST_F(MpiTest, TheBaselinesMpiDgemmSharesOneProductBetweenTheTwoNodes) {
  const uint64_t before = hosts_->BytesInto(1);
  const int size = 512, repeats = 2;
  const auto run = daemon_.RunCli({"baseline", "--pools", "mpi", "--size", std::to_string(size), "--repeat",
                                   std::to_string(repeats), "--samples", "1", "--json"},
                                  {}, 300s);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json recorded = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(recorded.is_object()) << run.out;
  const json* mpi = nullptr;
  for (const auto& f : recorded["figures"]) {
    if (f["name"] == "dgemm_gflops_mpi") mpi = &f;
  }
  ASSERT_NE(mpi, nullptr) << run.err;
  EXPECT_GT((*mpi)["value"].get<double>(), 0);
  const json& detail = (*mpi)["detail"];
  EXPECT_EQ(detail["ranks"], 2);
  EXPECT_EQ(detail["nodes"], json({kNodes[0], kNodes[1]})) << "rank 1 ran on the second node: " << detail;
  // B (n² doubles) went to the second node once untimed and once a multiply.
  const uint64_t sent = hosts_->BytesInto(1) - before;
  EXPECT_GE(sent, uint64_t{8} * size * size * (repeats + 1)) << "the broadcasts crossed the veth";
  // The job was the pool's: both nodes, one batch job.
  const json job = daemon_.Call("GET", "/v1/jobs/" + detail["job"].get<std::string>()).json;
  EXPECT_EQ(job["state"], "COMPLETED");
  EXPECT_EQ(job["nodes"], json({kNodes[0], kNodes[1]}));
}

// Ranks that find each other through their environment only: rank 0
// listens on MASTER_ADDR:MASTER_PORT, every other rank connects and says
// its rank; rank 0 prints what it heard.
TEST_F(MpiTest, ARendezvousJobsRanksFindEachOtherThroughTheirEnvironment) {
  const std::string script = R"py(
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(world)
    heard = []
    for _ in range(world - 1):
        c, peer = s.accept(); heard.append(c.recv(100).decode() + " from " + peer[0]); c.close()
    print("rank 0 on", socket.gethostname(), "heard:", "; ".join(sorted(heard)))
else:
    for _ in range(300):
        try:
            c = socket.create_connection((addr, port), timeout=1); break
        except OSError:
            time.sleep(0.1)
    c.sendall(("rank %d on %s" % (rank, socket.gethostname())).encode()); c.close()
)py";
  std::ofstream(shared_ + "/rendezvous.py") << script;
  const std::string id = daemon_.Submit({{"queue", "batch"},
                                         {"workload", {{"kind", "hpc"}}},
                                         {"launch", "per_node"},
                                         {"resources", {{"nodes", 2}, {"cpus", 1}, {"memory_mb", 256}}},
                                         {"command", {"python3", shared_ + "/rendezvous.py"}}});
  const json job = daemon_.WaitTerminal(id, 60s);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump(2) << Log(id, "stderr");
  const std::string heard = daemon_.Call("GET", "/v1/jobs/" + id + "/log?rank=0").body;
  EXPECT_EQ(heard, "rank 0 on " + kNodes[0] + " heard: rank 1 on " + kNodes[1] + " from " + hosts_->Address(1) + "\n");
}

}  // namespace
}  // namespace unisched::testing
