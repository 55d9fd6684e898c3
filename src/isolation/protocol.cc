#include "unisched/isolation/protocol.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace unisched::isolation {
namespace {

int WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// Reads exactly size bytes before the deadline.
int ReadAll(int fd, char* data, size_t size, std::chrono::steady_clock::time_point deadline, bool forever) {
  while (size > 0) {
    int wait = -1;
    if (!forever) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ETIMEDOUT;
      wait = static_cast<int>(left.count()) + 1;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (ready == 0) continue;  // the deadline check above ends it
    const ssize_t n = ::read(fd, data, size);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno;
    }
    if (n == 0) return EPIPE;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

int WriteFrame(int fd, const nlohmann::json& message) {
  const std::vector<uint8_t> body = nlohmann::json::to_cbor(message);
  if (body.size() > kMaxFrameBytes) return EMSGSIZE;
  const uint32_t size = static_cast<uint32_t>(body.size());
  std::string frame(4 + body.size(), '\0');
  for (int i = 0; i < 4; ++i) frame[static_cast<size_t>(i)] = static_cast<char>((size >> (8 * i)) & 0xff);
  std::memcpy(frame.data() + 4, body.data(), body.size());
  return WriteAll(fd, frame.data(), frame.size());
}

int ReadFrame(int fd, nlohmann::json& message, int timeout_ms) {
  const bool forever = timeout_ms < 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms);
  unsigned char header[4];
  if (int e = ReadAll(fd, reinterpret_cast<char*>(header), 4, deadline, forever)) return e;
  const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (size > kMaxFrameBytes) return EPROTO;
  std::string body(size, '\0');
  if (int e = ReadAll(fd, body.data(), size, deadline, forever)) return e;
  message = nlohmann::json::from_cbor(body, true, false);
  return message.is_discarded() ? EPROTO : 0;
}

nlohmann::json Bytes(const std::string& data) {
  return nlohmann::json::binary(std::vector<uint8_t>(data.begin(), data.end()));
}

std::string BytesOf(const nlohmann::json& value) {
  if (value.is_binary()) {
    const auto& b = value.get_binary();
    return std::string(b.begin(), b.end());
  }
  if (value.is_string()) return value.get<std::string>();
  return {};
}

std::string CheckRelativePath(const std::string& path) {
  if (path.empty()) return "the path is empty";
  if (path.front() == '/') return "the path must be relative to the work directory, e.g. src/main.py";
  if (path.size() > 4096) return "the path is longer than 4096 bytes";
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string part = path.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") return "the path may not hold empty, '.' or '..' components";
    if (part.find('\0') != std::string::npos) return "the path may not hold NUL bytes";
    i = j + 1;
  }
  return "";
}

}  // namespace unisched::isolation
