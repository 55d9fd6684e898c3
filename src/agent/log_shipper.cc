#include "agent/log_shipper.h"

#include <fstream>
#include <vector>

namespace unisched::agent {

bool LogShipper::Ship(const executor::AttemptRef& task, const Send& send) {
  for (const std::string stream : {"stdout", "stderr"}) {
    const std::pair key{task, stream};
    int64_t offset = 0;
    {
      std::lock_guard lock(mu_);
      offset = shipped_[key];
    }
    std::ifstream in(path_of_(task, stream), std::ios::binary);
    if (!in) continue;  // nothing written to it (yet): no file
    std::vector<char> buffer(kChunkBytes);
    // Chunk after chunk from where the daemon's copy ends; a daemon ahead
    // of us (we restarted) or behind (it lost a chunk) says where that is.
    while (true) {
      in.clear();
      in.seekg(offset);
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const std::streamsize got = in.gcount();
      if (got <= 0) break;  // all shipped
      const auto size = send(task, stream, offset, std::string_view(buffer.data(), static_cast<size_t>(got)));
      if (!size) return false;
      if (*size == kRefused) break;       // not wanted: nothing more of this stream
      if (*size == offset) return false;  // it took nothing: try again later
      offset = *size;
      std::lock_guard lock(mu_);
      shipped_[key] = offset;
    }
  }
  return true;
}

void LogShipper::Forget(const executor::AttemptRef& task) {
  std::lock_guard lock(mu_);
  shipped_.erase({task, "stdout"});
  shipped_.erase({task, "stderr"});
}

}  // namespace unisched::agent
