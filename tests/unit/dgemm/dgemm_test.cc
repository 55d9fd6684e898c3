// The DGEMM kernel (unisched/dgemm/dgemm.h): the FLOP count, a product
// OpenBLAS computes checked against the schoolbook one, and a measurement.

#include "unisched/dgemm/dgemm.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <vector>

namespace unisched::dgemm {
namespace {

TEST(DgemmFormulaTest, TwoNCubedFlopsPerMultiply) {
  EXPECT_EQ(FlopsPerMultiply(1), 2);
  EXPECT_EQ(FlopsPerMultiply(10), 2000);
  EXPECT_EQ(FlopsPerMultiply(2048), 2.0 * 2048 * 2048 * 2048);  // beyond int: computed in double
  // 1000^3 * 2 = 2e9 flops, 4 repeats in 2 s: 4 GFLOP/s.
  EXPECT_DOUBLE_EQ(Gflops(1000, 4, 2.0), 4.0);
  EXPECT_DOUBLE_EQ(Gflops(2048, 1, 1.0), 17.179869184);
  EXPECT_EQ(Gflops(100, 1, 0), 0) << "no time, no figure";
}

TEST(DgemmKernelTest, OpenBlasMultipliesAsTheSchoolbookDoes) {
  auto library = Load(1);
  ASSERT_TRUE(library.ok()) << library.error().message;
  EXPECT_NE(library->config.find("OpenBLAS"), std::string::npos) << library->config;
  EXPECT_NE(library->path.find("openblas"), std::string::npos) << library->path;
  EXPECT_FALSE(library->core.empty());
  const int n = 37;  // not a multiple of any blocking size
  std::vector<double> a(n * n), b(n * n), c(n * n, -1);
  for (int i = 0; i < n * n; ++i) {
    a[i] = (i % 7) - 3;
    b[i] = (i % 5) * 0.5;
  }
  Multiply(n, a.data(), b.data(), c.data());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int k = 0; k < n; ++k) want += a[i * n + k] * b[k * n + j];
      ASSERT_DOUBLE_EQ(c[i * n + j], want) << "C[" << i << "][" << j << "]";
    }
  }
}

// The cross-node kernel's check: the sum of C the inputs imply, without
// the product, against the product's; and a block of rows multiplied alone
// is those rows of the whole product.
TEST(DgemmKernelTest, TheSumOfCIsWhatTheInputsImplyAndABlockOfRowsIsTheirPart) {
  ASSERT_TRUE(Load(1).ok());
  for (int n : {1, 2, 37, 100}) {
    SCOPED_TRACE(n);
    const size_t cells = static_cast<size_t>(n) * n;
    std::vector<double> a(cells), b(cells), c(cells);
    for (size_t i = 0; i < cells; ++i) {
      a[i] = EntryOfA(i);
      b[i] = EntryOfB(i);
    }
    Multiply(n, a.data(), b.data(), c.data());
    double sum = 0, scale = 0;
    for (double v : c) sum += v;
    const double expected = ExpectedSum(n, &scale);
    EXPECT_GT(scale, 0);
    EXPECT_LT(std::fabs(sum - expected) / scale, 1e-12) << sum << " against " << expected;
    // Rows [first, first + rows) alone.
    const int first = n / 3, rows = n - n / 3 - n / 4;
    std::vector<double> block(static_cast<size_t>(rows) * n, -1);
    MultiplyRows(rows, n, a.data() + static_cast<size_t>(first) * n, b.data(), block.data());
    for (size_t i = 0; i < block.size(); ++i) {
      ASSERT_DOUBLE_EQ(block[i], c[static_cast<size_t>(first) * n + i]) << i;
    }
    // A rank whose block never arrived (left zero) fails the check of
    // MeasureDistributed (relative error under 1e-6).
    if (n >= 37) {
      double missing = sum;
      for (size_t i = 0; i < block.size(); ++i) missing -= c[static_cast<size_t>(first) * n + i];
      EXPECT_GT(std::fabs(missing - expected) / scale, 1e-6);
    }
  }
}

TEST(DgemmKernelTest, AMeasurementReportsItsFigures) {
  auto m = Measure(128, 2, 1);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->size, 128);
  EXPECT_EQ(m->repeats, 2);
  EXPECT_EQ(m->threads, 1);
  EXPECT_GT(m->seconds, 0);
  EXPECT_DOUBLE_EQ(m->gflops, Gflops(128, 2, m->seconds));
  EXPECT_GT(m->gflops, 0.01) << "even a slow machine does 10 MFLOP/s";
}

TEST(DgemmKernelTest, DefaultThreadsAreTheCpusAtMostOmpNumThreads) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string restore = saved ? saved : "";
  ::unsetenv("OMP_NUM_THREADS");
  const int cpus = DefaultThreads();
  EXPECT_GE(cpus, 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  EXPECT_EQ(DefaultThreads(), 1);
  ::setenv("OMP_NUM_THREADS", "100000", 1);
  EXPECT_EQ(DefaultThreads(), cpus) << "never more threads than CPUs";
  ::setenv("OMP_NUM_THREADS", "lots", 1);
  EXPECT_EQ(DefaultThreads(), cpus) << "an unreadable value is ignored";
  if (saved) {
    ::setenv("OMP_NUM_THREADS", restore.c_str(), 1);
  } else {
    ::unsetenv("OMP_NUM_THREADS");
  }
}

}  // namespace
}  // namespace unisched::dgemm
