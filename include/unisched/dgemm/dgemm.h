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

// Loads OpenBLAS, multiplies once untimed, then `repeats` times timed.
Result<Measurement> Measure(int n, int repeats, int threads);

}  // namespace unisched::dgemm
