#pragma once
// The control channel between the daemon and a sandbox instance's init
// (unisched-sandbox): a stream socket carrying frames, each a 4-byte
// little-endian length and a CBOR-encoded JSON value (CBOR, so file contents
// and program output travel as bytes, whatever their encoding).
//
// Requests and answers, one answer per request, in order:
//   {"op": "exec", "argv": [...], "env": {...}, "stdin": bytes, "timeout_ms": N, "output_cap": N}
//     -> {"exit_code", "stdout": bytes, "stderr": bytes, "duration_ms", "timed_out",
//         "stdout_truncated", "stderr_truncated"}
//   {"op": "put", "path": "rel/path", "data": bytes}  -> {"size": N}
//   {"op": "get", "path": "rel/path", "max": N}       -> {"data": bytes}
// Any answer may instead be {"error": "...", "code": "not_found" | "too_large" | "bad_path" | "io"}.
// The first frame the init sends is {"ready": true} or {"error": "..."}.

#include <nlohmann/json.hpp>
#include <string>

namespace unisched::isolation {

inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Blocking write of one frame. Returns 0 or an errno.
int WriteFrame(int fd, const nlohmann::json& message);
// Reads one frame, waiting at most timeout_ms (< 0: forever). Returns 0,
// ETIMEDOUT, EPIPE (the other side closed), EPROTO (not a frame) or an errno.
int ReadFrame(int fd, nlohmann::json& message, int timeout_ms);

// Bytes <-> the CBOR byte string of a frame.
nlohmann::json Bytes(const std::string& data);
std::string BytesOf(const nlohmann::json& value);

// A path relative to the work directory that stays inside it: not empty, not
// absolute, no "." or ".." component, no empty component. "" when valid,
// else why not.
std::string CheckRelativePath(const std::string& path);

}  // namespace unisched::isolation
