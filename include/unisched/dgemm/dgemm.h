#pragma once
// The fp64 kernel of `unisched baseline` (docs/baseline.md): one n x n
// double-precision matrix multiply, C = A·B, through cblas_dgemm of Debian's
// OpenBLAS, timed. `unisched baseline dgemm` runs it inside a job on each
// node measured, so the figure is that node's, with the BLAS installed there.
//
// OpenBLAS is loaded (dlopen) by the first call that needs it, not linked
// into the binary: its pthread build starts a worker thread per CPU when it
// is loaded, and the same binary is the daemon, the CLI, the agent and
// `unisched step` in every job, none of which multiplies a matrix.

#include <string>
#include <vector>

#include "unisched/common/status.h"

namespace unisched::dgemm {

// Floating-point operations of one C = A·B of n x n matrices: each of the
// n² entries of C is a dot product of length n, n multiplications and n
// additions (n - 1 within the dot product and one into C, which BLAS
// computes as C = alpha·A·B + beta·C). 2n³ is also the count LINPACK, HPL
// and vendors' DGEMM figures use, so the figures compare.
double FlopsPerMultiply(int n);

// GFLOP/s of `repeats` multiplies of size n in `seconds`:
// 2·n³·repeats / seconds / 10⁹. 0 when seconds is not positive.
double Gflops(int n, int repeats, double seconds);

// The BLAS that did the work.
struct Library {
  std::string path;    // the shared object, symbolic links resolved
  std::string config;  // OpenBLAS's build: "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  std::string core;    // the kernels OpenBLAS chose for this CPU, e.g. "Haswell"
};

struct Measurement {
  int size = 0;
  int repeats = 0;
  int threads = 0;
  double seconds = 0;  // the timed multiplies, after an untimed one (thread start-up, first touch of C)
  double gflops = 0;
  Library library;
};

// The threads to use when none is asked for: the CPUs this process may run
// on, at most OMP_NUM_THREADS when set (unisched sets it to the job's CPUs).
int DefaultThreads();

// Loads OpenBLAS (once per process) and has it use `threads` threads.
Result<Library> Load(int threads);

// C = A·B of row-major n x n matrices through cblas_dgemm. Load() first.
void Multiply(int n, const double* a, const double* b, double* c);

// C = A·B of a row-major rows x n block of A and an n x n B. Load() first.
void MultiplyRows(int rows, int n, const double* a, const double* b, double* c);

// Loads OpenBLAS, multiplies once untimed, then `repeats` times timed.
Result<Measurement> Measure(int n, int repeats, int threads);

// ---- Across nodes: one DGEMM shared by the ranks of an MPI job ----
//
// `unisched baseline dgemm --mpi`, started by mpirun on every node of a job
// (mpirun reaching the nodes through `unisched step --rsh`), computes one
// C = A·B of n x n matrices together: rank r owns a block of about n/p rows
// of A and C, rank 0 broadcasts B to all ranks at every multiply, each rank
// multiplies its block through OpenBLAS, and an allreduce sums a checksum of
// C that rank 0 checks against the one the inputs imply. The time runs
// from a barrier before the first multiply to a barrier after the last, so
// it holds the broadcasts over the interconnect as well as the arithmetic:
// the figure is what the nodes deliver together on one problem, which the
// per-node figures summed cannot say.
//
// OpenMPI's libmpi is loaded (dlopen) by the kernel alone, as OpenBLAS is,
// and through OpenMPI's binary interface (its handles are the addresses of
// ompi_mpi_* objects), which is what Debian's mpi-default is.

struct DistributedMeasurement {
  int size = 0;
  int repeats = 0;
  int threads = 0;  // OpenBLAS threads of each rank
  int ranks = 0;
  int rank = 0;  // this process's; only rank 0's figures are complete
  double seconds = 0;
  double gflops = 0;                 // 2·n³·repeats / seconds / 10⁹ (FlopsPerMultiply)
  double checksum_error = 0;         // relative: |sum(C) - expected| / sum of |terms|
  std::vector<std::string> nodes;    // node of each rank (UNISCHED_NODE, else the host name)
  std::vector<double> rank_seconds;  // each rank's own multiplies, its share of the time
  Library library;
  std::string mpi_library;  // MPI_Get_library_version's first line
};

// Every rank calls it once; it initialises and finalises MPI itself.
Result<DistributedMeasurement> MeasureDistributed(int n, int repeats, int threads);

// The expected sum of all entries of C = A·B: Σ_i Σ_j Σ_k A[i][k]·B[k][j]
// = Σ_k (Σ_i A[i][k])·(Σ_j B[k][j]), the column sums of A times the row sums
// of B, O(n²) where the product is O(n³). `scale` receives Σ_k |colA_k·rowB_k|,
// the size the rounding error of either sum is relative to.
double ExpectedSum(int n, double* scale);

// The inputs, the same on every rank without sending A: entry `index`
// (row·n + column) of A and of B. Values of either sign, none zero, so no
// BLAS shortcut for zeros and no overflow.
double EntryOfA(size_t index);
double EntryOfB(size_t index);

}  // namespace unisched::dgemm
