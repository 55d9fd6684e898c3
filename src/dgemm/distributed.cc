// The cross-node DGEMM over MPI (unisched/dgemm/dgemm.h, "Across nodes").
// The only translation unit that includes OpenMPI's header; libmpi itself
// is opened here at run time, as OpenBLAS is in dgemm.cc.

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "unisched/dgemm/dgemm.h"
#include "unisched/posix/shared_library.h"

// OpenMPI's C++ bindings are deprecated and would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

namespace unisched::dgemm {

namespace {

// The entry points and the predefined handles used. In OpenMPI a handle
// such as MPI_COMM_WORLD is the address of a global object of libmpi
// (ompi_mpi_comm_world), so it is looked up like a function.
struct Mpi {
  decltype(&MPI_Init) init = nullptr;
  decltype(&MPI_Finalize) finalize = nullptr;
  decltype(&MPI_Comm_rank) comm_rank = nullptr;
  decltype(&MPI_Comm_size) comm_size = nullptr;
  decltype(&MPI_Barrier) barrier = nullptr;
  decltype(&MPI_Bcast) bcast = nullptr;
  decltype(&MPI_Allreduce) allreduce = nullptr;
  decltype(&MPI_Gather) gather = nullptr;
  decltype(&MPI_Wtime) wtime = nullptr;
  decltype(&MPI_Get_library_version) library_version = nullptr;
  MPI_Comm world = nullptr;
  MPI_Datatype double_type = nullptr;
  MPI_Datatype char_type = nullptr;
  MPI_Op sum = nullptr;
};

Result<Mpi> OpenMpi() {
  // Global: OpenMPI's own plug-ins (mca_*.so), which it opens in MPI_Init,
  // resolve their calls into libmpi through the global namespace.
  auto opened =
      posix::OpenSharedLibrary({UNISCHED_MPI_SONAME, UNISCHED_MPI_FILE}, RTLD_NOW | RTLD_GLOBAL, "OpenMPI's libmpi",
                               "install it on every node: apt-get install openmpi-bin (Debian)");
  if (!opened.ok()) return opened.error();
  void* handle = *opened;
  Mpi m;
  bool all = true;
  auto find = [handle, &all](auto& slot, const char* symbol) { all = posix::FindSymbol(handle, slot, symbol) && all; };
  find(m.init, "MPI_Init");
  find(m.finalize, "MPI_Finalize");
  find(m.comm_rank, "MPI_Comm_rank");
  find(m.comm_size, "MPI_Comm_size");
  find(m.barrier, "MPI_Barrier");
  find(m.bcast, "MPI_Bcast");
  find(m.allreduce, "MPI_Allreduce");
  find(m.gather, "MPI_Gather");
  find(m.wtime, "MPI_Wtime");
  find(m.library_version, "MPI_Get_library_version");
  find(m.world, "ompi_mpi_comm_world");
  find(m.double_type, "ompi_mpi_double");
  find(m.char_type, "ompi_mpi_char");
  find(m.sum, "ompi_mpi_op_sum");
  if (!all) {
    return Error::Unavailable(
        std::string("the MPI library loaded is not OpenMPI (the kernel uses OpenMPI's binary interface): ") +
        ::dlerror());
  }
  return m;
}

// Rows [first, first + count) of the n rows, of p ranks: the first n % p
// ranks take one row more than n / p, so no two blocks differ by more
// than a row.
struct Block {
  int first = 0;
  int count = 0;
};

Block RowsOf(int rank, int ranks, int n) {
  const int base = n / ranks, extra = n % ranks;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::string NodeName() {
  if (const char* node = std::getenv("UNISCHED_NODE"); node != nullptr && *node != '\0') return node;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

Result<DistributedMeasurement> MeasureDistributed(int n, int repeats, int threads) {
  auto blas = Load(threads);
  if (!blas.ok()) return blas.error();
  auto opened = OpenMpi();
  if (!opened.ok()) return opened.error();
  const Mpi& mpi = *opened;
  if (mpi.init(nullptr, nullptr) != MPI_SUCCESS) return Error::Unavailable("MPI_Init failed");
  DistributedMeasurement m;
  m.size = n;
  m.repeats = repeats;
  m.threads = threads;
  m.library = *blas;
  mpi.comm_rank(mpi.world, &m.rank);
  mpi.comm_size(mpi.world, &m.ranks);
  {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    mpi.library_version(version, &length);
    m.mpi_library = std::string(version, static_cast<size_t>(std::max(length, 0)));
    m.mpi_library = m.mpi_library.substr(0, m.mpi_library.find_first_of("\r\n,"));
  }

  const size_t size = static_cast<size_t>(n);
  const Block rows = RowsOf(m.rank, m.ranks, n);
  const size_t first = static_cast<size_t>(rows.first), count = static_cast<size_t>(rows.count);
  std::vector<double> a(count * size), b(size * size), c(count * size);
  for (size_t i = 0; i < count * size; ++i) a[i] = EntryOfA(first * size + i);
  if (m.rank == 0) {
    for (size_t i = 0; i < size * size; ++i) b[i] = EntryOfB(i);
  }
  // MPI counts are ints: B goes in pieces of at most 2^30 doubles.
  auto broadcast_b = [&] {
    constexpr size_t kPiece = size_t{1} << 30;
    for (size_t at = 0; at < b.size(); at += kPiece) {
      mpi.bcast(b.data() + at, static_cast<int>(std::min(kPiece, b.size() - at)), mpi.double_type, 0, mpi.world);
    }
  };
  auto multiply = [&] {
    if (rows.count > 0) MultiplyRows(rows.count, n, a.data(), b.data(), c.data());
  };

  // Untimed: the first broadcast sets up the connections, the first
  // multiply starts OpenBLAS's threads and touches C.
  broadcast_b();
  multiply();
  double own = 0;
  mpi.barrier(mpi.world);
  const double start = mpi.wtime();
  for (int r = 0; r < repeats; ++r) {
    broadcast_b();
    const auto before = std::chrono::steady_clock::now();
    multiply();
    own += std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  }
  mpi.barrier(mpi.world);
  m.seconds = mpi.wtime() - start;
  m.gflops = Gflops(n, repeats, m.seconds);

  // The result, summed over all ranks, against what A and B imply.
  double mine = 0, total = 0;
  for (double v : c) mine += v;
  mpi.allreduce(&mine, &total, 1, mpi.double_type, mpi.sum, mpi.world);
  // Where each rank ran, and how long its own multiplies took.
  constexpr int kName = 256;
  char name[kName] = {};
  std::strncpy(name, NodeName().c_str(), kName - 1);
  std::vector<char> names(m.rank == 0 ? static_cast<size_t>(kName * m.ranks) : 0);
  std::vector<double> seconds(m.rank == 0 ? static_cast<size_t>(m.ranks) : 0);
  mpi.gather(name, kName, mpi.char_type, names.data(), kName, mpi.char_type, 0, mpi.world);
  mpi.gather(&own, 1, mpi.double_type, seconds.data(), 1, mpi.double_type, 0, mpi.world);
  mpi.finalize();

  if (m.rank != 0) return m;
  for (int r = 0; r < m.ranks; ++r) m.nodes.emplace_back(names.data() + static_cast<size_t>(r) * kName);
  m.rank_seconds = std::move(seconds);
  double scale = 0;
  const double expected = ExpectedSum(n, &scale);
  m.checksum_error = std::fabs(total - expected) / std::max(scale, 1e-300);
  // Rounding: each entry of C sums n products, each order of summation
  // off by at most about n·ε relative; 1e-6 leaves room for any n a node
  // can hold while a wrong or missing block (an error of order 1) fails.
  if (!(m.checksum_error < 1e-6)) {
    return Error::Internal("the distributed product is wrong: the sum of C is " + std::to_string(total) +
                           ", the inputs imply " + std::to_string(expected));
  }
  return m;
}

}  // namespace unisched::dgemm
