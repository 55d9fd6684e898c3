// Opening a shared library at run time: the first name that opens wins, a
// library that is not there is an error saying what to install, and symbols
// come typed as the slot they fill.

#include "unisched/posix/shared_library.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace unisched::posix {
namespace {

TEST(SharedLibraryTest, AMissingLibraryIsAnErrorNamingItAndWhatToInstall) {
  auto opened = OpenSharedLibrary({"libunisched-absent.so.9", "/nonexistent/libunisched-absent.so"}, RTLD_NOW,
                                  "the absent library", "install it: apt-get install absent");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().kind, ErrorKind::kUnavailable);
  const std::string& message = opened.error().message;
  EXPECT_NE(message.find("cannot load the absent library"), std::string::npos) << message;
  // Every name tried is reported, and the fix.
  EXPECT_NE(message.find("libunisched-absent.so.9"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/libunisched-absent.so"), std::string::npos) << message;
  EXPECT_NE(message.find("apt-get install absent"), std::string::npos) << message;
}

TEST(SharedLibraryTest, TheFirstNameThatOpensIsUsedAndItsSymbolsAreFound) {
  auto opened = OpenSharedLibrary({"libunisched-absent.so.9", "libz.so.1"}, RTLD_NOW | RTLD_LOCAL, "zlib", "");
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  decltype(&::zlibVersion) version = nullptr;
  ASSERT_TRUE(FindSymbol(*opened, version, "zlibVersion"));
  // The function itself, called through the slot: the library's version,
  // the one Debian's headers were made with.
  EXPECT_STREQ(version(), ZLIB_VERSION);
  void (*absent)() = nullptr;
  EXPECT_FALSE(FindSymbol(*opened, absent, "unisched_no_such_symbol"));
  EXPECT_EQ(absent, nullptr);
}

}  // namespace
}  // namespace unisched::posix
