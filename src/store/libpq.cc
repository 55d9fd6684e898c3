// Pq(): see libpq.h.

#include "store/libpq.h"

#include <dlfcn.h>

#include <string>

#include "unisched/posix/shared_library.h"

namespace unisched::store {
namespace {

Result<LibPq> LoadLibPq() {
  auto opened = posix::OpenSharedLibrary({"libpq.so.5"}, RTLD_NOW | RTLD_LOCAL, "libpq (the PostgreSQL client)",
                                         "install it: apt-get install libpq5 (Debian)");
  if (!opened.ok()) return opened.error();
  void* handle = *opened;
  LibPq api;
  bool all = true;
#define UNISCHED_LIBPQ_FIND(name) all = posix::FindSymbol(handle, api.name, #name) && all;
  UNISCHED_LIBPQ_FUNCTIONS(UNISCHED_LIBPQ_FIND)
#undef UNISCHED_LIBPQ_FIND
  if (!all) return Error::Unavailable(std::string("the libpq loaded lacks a function: ") + ::dlerror());
  return api;
}

}  // namespace

const Result<LibPq>& Pq() {
  static const Result<LibPq> api = LoadLibPq();
  return api;
}

}  // namespace unisched::store
