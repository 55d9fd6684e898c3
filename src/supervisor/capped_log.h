#pragma once
// One captured output stream of a job: the bytes up to a cap go to a file,
// the rest is dropped and a single marker line says so. The file is created
// by the first byte: a silent stream leaves no file (creating inodes is the
// dominant cost of a short job), which readers take as empty output.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace unisched::supervisor {

class CappedLog {
 public:
  CappedLog() = default;
  CappedLog(const CappedLog&) = delete;
  CappedLog& operator=(const CappedLog&) = delete;
  ~CappedLog();

  // Where the output goes, created (truncated) when the first byte comes.
  // cap <= 0: no cap. make_dir, if given, runs just before that creation
  // and returns 0 or the errno (the directory is made by the first byte too).
  void Open(const std::string& path, int64_t cap, std::function<int()> make_dir = {});
  // Keeps what fits under the cap; on the first byte past it writes
  // "[unisched: output truncated at N bytes]" on a line of its own.
  void Append(const char* data, size_t size);
  bool truncated() const { return truncated_; }
  int64_t written() const { return written_; }
  // The errno of a failed creation of the file (its output is then lost), or 0.
  int open_error() const { return open_error_; }

 private:
  void WriteAll(const char* data, size_t size);

  std::string path_;
  std::function<int()> make_dir_;
  int fd_ = -1;
  int open_error_ = 0;
  int64_t cap_ = 0;
  int64_t written_ = 0;  // job bytes kept, without the marker
  bool truncated_ = false;
  char last_ = '\n';
};

}  // namespace unisched::supervisor
