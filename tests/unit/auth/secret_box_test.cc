// SecretBox (docs/secrets.md): AES-256-GCM sealing bound to its context,
// a key of its own file, and every way a sealed value can fail to open.

#include "unisched/auth/secret_box.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace unisched::auth {
namespace {

namespace fs = std::filesystem;

SecretBox Box(char fill) {
  auto box = SecretBox::FromKey(std::string(SecretBox::kKeyBytes, fill));
  EXPECT_TRUE(box.ok());
  return std::move(*box);
}

TEST(SecretBoxTest, SealsAndOpensUnderTheSameContextOnly) {
  const SecretBox box = Box('k');
  auto sealed = box.Seal("hunter2", "genomics/db");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->find("hunter2"), std::string::npos);
  EXPECT_EQ(sealed->rfind("v1." + box.key_id() + ".", 0), 0u) << *sealed;
  EXPECT_EQ(*box.Open(*sealed, "genomics/db"), "hunter2");
  // A fresh nonce each time: the same value seals differently.
  EXPECT_NE(*box.Seal("hunter2", "genomics/db"), *sealed);
  // Moved onto another secret's row: does not open.
  EXPECT_FALSE(box.Open(*sealed, "physics/db").ok());
  // Empty and binary values round-trip.
  EXPECT_EQ(*box.Open(*box.Seal("", "p/e"), "p/e"), "");
  const std::string binary("\x00\x01\xff\n", 4);
  EXPECT_EQ(*box.Open(*box.Seal(binary, "p/b"), "p/b"), binary);
}

TEST(SecretBoxTest, AnotherKeyOrATamperedValueIsRefusedWithoutTheValue) {
  const SecretBox box = Box('k');
  const std::string sealed = *box.Seal("hunter2", "p/n");
  auto other = Box('o').Open(sealed, "p/n");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("sealed with key " + box.key_id()), std::string::npos) << other.error().message;
  std::string tampered = sealed;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  auto opened = box.Open(tampered, "p/n");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().message.find("hunter2"), std::string::npos);
  for (const std::string& broken :
       std::vector<std::string>{"", "v1", "v2." + box.key_id() + ".00.00", "v1." + box.key_id() + ".zz.zz"}) {
    EXPECT_FALSE(box.Open(broken, "p/n").ok()) << broken;
  }
}

TEST(SecretBoxTest, TheKeyFileIsMadeOnceAndMustBePrivate) {
  const fs::path dir = fs::temp_directory_path() / ("unisched-key-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "secrets.key").string();
  EXPECT_FALSE(SecretBox::OpenKeyFile(path, /*create=*/false).ok());
  auto made = SecretBox::OpenKeyFile(path, /*create=*/true);
  ASSERT_TRUE(made.ok()) << made.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = SecretBox::OpenKeyFile(path, /*create=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->key_id(), made->key_id());  // not made twice
  EXPECT_EQ(*again->Open(*made->Seal("v", "p/n"), "p/n"), "v");

  ::chmod(path.c_str(), 0644);
  auto open_to_all = SecretBox::OpenKeyFile(path, true);
  ASSERT_FALSE(open_to_all.ok());
  EXPECT_NE(open_to_all.error().message.find("chmod 600"), std::string::npos) << open_to_all.error().message;
  ::chmod(path.c_str(), 0600);
  std::ofstream(path) << "not hex\n";
  auto garbage = SecretBox::OpenKeyFile(path, true);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("64 hex digits"), std::string::npos) << garbage.error().message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace unisched::auth
