// DGEMM through OpenBLAS (unisched/dgemm/dgemm.h). The only translation
// unit that includes OpenBLAS's header; the library itself is opened here
// at run time (the header says why).

#include "unisched/dgemm/dgemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "unisched/posix/shared_library.h"

namespace unisched::dgemm {

namespace {

// The entry points used, typed by OpenBLAS's own declarations.
struct Entries {
  decltype(&cblas_dgemm) dgemm = nullptr;
  decltype(&openblas_set_num_threads) set_threads = nullptr;
  decltype(&openblas_get_config) config = nullptr;
  decltype(&openblas_get_corename) corename = nullptr;
  Library library;
};

std::mutex load_mu;
std::optional<Entries> loaded;  // under load_mu; set once, never unloaded

Result<Entries> Open(int threads) {
  // OpenBLAS sizes its thread pool when it is loaded; the variable tells it
  // how many, so a 2-thread run on a 128-CPU node does not start 127.
  ::setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  auto opened = posix::OpenSharedLibrary({UNISCHED_OPENBLAS_SONAME, UNISCHED_OPENBLAS_FILE}, RTLD_NOW | RTLD_LOCAL,
                                         "OpenBLAS", "install it on this node: apt-get install libopenblas0 (Debian)");
  if (!opened.ok()) return opened.error();
  void* handle = *opened;
  Entries e;
  auto find = [handle](auto& slot, const char* symbol) { return posix::FindSymbol(handle, slot, symbol); };
  if (!find(e.dgemm, "cblas_dgemm") || !find(e.set_threads, "openblas_set_num_threads") ||
      !find(e.config, "openblas_get_config") || !find(e.corename, "openblas_get_corename")) {
    return Error::Unavailable(std::string("the BLAS loaded is not OpenBLAS: ") + ::dlerror());
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(e.dgemm), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ignored;
    const auto real = std::filesystem::canonical(info.dli_fname, ignored);
    e.library.path = real.empty() ? info.dli_fname : real.string();
  }
  e.library.config = e.config();
  e.library.core = e.corename();
  return e;
}

}  // namespace

double FlopsPerMultiply(int n) {
  const double size = n;
  return 2.0 * size * size * size;
}

double Gflops(int n, int repeats, double seconds) {
  if (seconds <= 0) return 0;
  return FlopsPerMultiply(n) * repeats / seconds / 1e9;
}

int DefaultThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr) {
    char* end = nullptr;
    const long asked = std::strtol(omp, &end, 10);
    if (end != omp && *end == '\0' && asked > 0) cpus = std::min<long>(cpus, asked);
  }
  return std::max(cpus, 1);
}

Result<Library> Load(int threads) {
  std::lock_guard lock(load_mu);
  if (!loaded) {
    auto opened = Open(threads);
    if (!opened.ok()) return opened.error();
    loaded = std::move(*opened);
  }
  loaded->set_threads(threads);
  return loaded->library;
}

void Multiply(int n, const double* a, const double* b, double* c) {
  MultiplyRows(n, n, a, b, c);
}

void MultiplyRows(int rows, int n, const double* a, const double* b, double* c) {
  loaded->dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, n, 1.0, a, n, b, n, 0.0, c, n);
}

double EntryOfA(size_t index) {
  return static_cast<double>(index % 97) / 97.0 - 0.49;
}

double EntryOfB(size_t index) {
  return static_cast<double>(index % 89) / 89.0 - 0.51;
}

double ExpectedSum(int n, double* scale) {
  const size_t size = static_cast<size_t>(n);
  std::vector<double> column_of_a(size, 0.0), row_of_b(size, 0.0);
  for (size_t i = 0; i < size; ++i) {
    for (size_t k = 0; k < size; ++k) {
      column_of_a[k] += EntryOfA(i * size + k);
      row_of_b[i] += EntryOfB(i * size + k);
    }
  }
  double sum = 0, magnitude = 0;
  for (size_t k = 0; k < size; ++k) {
    sum += column_of_a[k] * row_of_b[k];
    magnitude += std::fabs(column_of_a[k] * row_of_b[k]);
  }
  if (scale != nullptr) *scale = magnitude;
  return sum;
}

Result<Measurement> Measure(int n, int repeats, int threads) {
  auto library = Load(threads);
  if (!library.ok()) return library.error();
  const size_t cells = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<double> a(cells), b(cells), c(cells);
  for (size_t i = 0; i < cells; ++i) {
    a[i] = EntryOfA(i);
    b[i] = EntryOfB(i);
  }
  Multiply(n, a.data(), b.data(), c.data());
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) Multiply(n, a.data(), b.data(), c.data());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!std::isfinite(c[cells / 2])) return Error::Internal("the DGEMM result is not a finite number");
  Measurement m;
  m.size = n;
  m.repeats = repeats;
  m.threads = threads;
  m.seconds = seconds;
  m.gflops = Gflops(n, repeats, seconds);
  m.library = std::move(*library);
  return m;
}

}  // namespace unisched::dgemm
