// SecretBox: see unisched/auth/secret_box.h.

#include "unisched/auth/secret_box.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "unisched/auth/auth.h"

namespace unisched::auth {

namespace {

constexpr char kVersion[] = "v1";

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool FromHex(std::string_view hex, std::string& out) {
  if (hex.size() % 2 != 0) return false;
  out.clear();
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

std::string KeyId(std::string_view key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), 8));
}

struct CipherFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Cipher = std::unique_ptr<EVP_CIPHER_CTX, CipherFree>;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

Error Broken(const std::string& what) {
  return Error::Internal("secret store: " + what);
}

}  // namespace

Result<SecretBox> SecretBox::FromKey(std::string_view key) {
  if (key.size() != kKeyBytes) return Broken("a key must be " + std::to_string(kKeyBytes) + " bytes");
  SecretBox box;
  box.key_ = std::string(key);
  box.key_id_ = KeyId(key);
  return box;
}

Result<SecretBox> SecretBox::OpenKeyFile(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT && create) {
    std::string key(kKeyBytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
      return Broken("no random bytes for a new key");
    }
    const std::string text = HexEncode(key) + "\n";
    // O_EXCL: two daemons starting at once never both write a key.
    const std::string temp = path + ".new";
    int out = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) return Error::Internal("cannot create " + temp + ": " + std::strerror(errno));
    const bool written =
        ::write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(out) == 0;
    ::close(out);
    // link, not rename: a key another daemon made meanwhile is kept.
    if (!written || (::link(temp.c_str(), path.c_str()) != 0 && errno != EEXIST)) {
      const int err = errno;
      ::unlink(temp.c_str());
      return Error::Internal("cannot write the secrets key " + path + ": " + std::strerror(err));
    }
    ::unlink(temp.c_str());
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) {
    return Error::Internal("cannot open the secrets key " + path + ": " + std::strerror(errno) +
                           " (secrets.key_file; a replica needs a copy of the first replica's)");
  }
  struct stat st {};
  std::string text(256, '\0');
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0) n = ::read(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n < 0) return Error::Internal("cannot read the secrets key " + path + ": " + std::strerror(err));
  if ((st.st_mode & 077) != 0) {
    return Error::Internal("the secrets key " + path + " may be read by others (mode " +
                           std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                           std::to_string(st.st_mode & 7) + "); chmod 600 it");
  }
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  std::string key;
  if (text.size() != kKeyBytes * 2 || !FromHex(text, key)) {
    return Error::Internal("the secrets key " + path + " must hold " + std::to_string(kKeyBytes * 2) +
                           " hex digits (e.g. from `openssl rand -hex 32`)");
  }
  return FromKey(key);
}

Result<std::string> SecretBox::Seal(std::string_view plain, std::string_view context) const {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return Broken("no random bytes for a nonce");
  }
  Cipher ctx(EVP_CIPHER_CTX_new());
  std::vector<unsigned char> out(plain.size() + kTagBytes);
  int len = 0, total = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, Bytes(key_), Bytes(nonce)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(context), static_cast<int>(context.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), out.data(), &len, Bytes(plain), static_cast<int>(plain.size())) != 1) {
    return Broken("encryption failed");
  }
  total = len;
  if (EVP_EncryptFinal_ex(ctx.get(), out.data() + total, &len) != 1) return Broken("encryption failed");
  total += len;
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, out.data() + total) != 1) {
    return Broken("encryption failed (tag)");
  }
  total += kTagBytes;
  const std::string sealed(reinterpret_cast<const char*>(out.data()), static_cast<size_t>(total));
  return std::string(kVersion) + "." + key_id_ + "." + HexEncode(nonce) + "." + HexEncode(sealed);
}

Result<std::string> SecretBox::Open(std::string_view sealed, std::string_view context) const {
  // v1.<key id>.<nonce>.<ciphertext+tag>
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t dot; (dot = sealed.find('.', start)) != std::string_view::npos; start = dot + 1) {
    parts.push_back(sealed.substr(start, dot - start));
  }
  parts.push_back(sealed.substr(start));
  std::string nonce, data;
  if (parts.size() != 4 || parts[0] != kVersion || !FromHex(parts[2], nonce) || nonce.size() != kNonceBytes ||
      !FromHex(parts[3], data) || data.size() < kTagBytes) {
    return Broken("a stored secret is damaged (not a sealed value of this version)");
  }
  if (parts[1] != key_id_) {
    return Broken("a stored secret was sealed with key " + std::string(parts[1]) + ", but secrets.key_file holds key " +
                  key_id_ + "; give this daemon the key file it was sealed with");
  }
  const size_t size = data.size() - kTagBytes;
  std::string tag = data.substr(size);
  Cipher ctx(EVP_CIPHER_CTX_new());
  std::string plain(size, '\0');
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, Bytes(key_), Bytes(nonce)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(context), static_cast<int>(context.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len, Bytes(data),
                        static_cast<int>(size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1) {
    return Broken("decryption failed");
  }
  int last = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &last) != 1) {
    return Broken("a stored secret does not open: it was altered, or belongs to another secret");
  }
  return plain;
}

}  // namespace unisched::auth
