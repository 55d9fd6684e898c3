// Replays inputs through a fuzz target without libFuzzer: the regression
// test of `make test` (docs/fuzzing.md). Built with the normal compiler from
// the same <name>_fuzz.cc as the libFuzzer executable, so every seed and
// every input that once crashed keeps running through the real decoders.
//
//   <name>_fuzz_replay PATH...   each PATH a file, or a directory whose files
//                                (not recursively, in name order) are inputs
//
// A missing PATH is skipped: a target without regressions has no directory.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Defined by the targets that set up state once (libFuzzer calls it too).
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  // A copy of exactly `size` bytes, so that ASan sees a read past the end as
  // one, as it would under libFuzzer.
  const std::vector<uint8_t> data(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int inputs = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& file : files) {
        ok = RunFile(file) && ok;
        ++inputs;
      }
    } else if (std::filesystem::exists(arg, ec)) {
      ok = RunFile(arg) && ok;
      ++inputs;
    }
  }
  // A crash or sanitizer report ends the process before this line; reaching
  // it means every input ran through.
  std::printf("replay: %d inputs ran without a crash\n", inputs);
  // No input at all is a broken test (a seed corpus moved away), not a pass.
  return ok && inputs > 0 ? 0 : 1;
}
