#pragma once
// Opening a shared library at run time rather than linking it, for a
// dependency only some processes use: the DGEMM kernels (dgemm.h says why),
// libcurl for object stores and libpq for the PostgreSQL store (a linked
// library and everything it needs is loaded and relocated by every process,
// the CLI and the trace replay too; docs/benchmarks.md). Names are tried in
// order: a soname first (the library Debian's alternatives select, as a
// linked program would get), then, say, the file the build found.

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <type_traits>

#include "unisched/common/status.h"

namespace unisched::posix {

// The handle of the first of `names` that opens with `flags`; otherwise an
// Unavailable error naming `what`, every name's failure and `install`.
inline Result<void*> OpenSharedLibrary(std::initializer_list<const char*> names, int flags, const std::string& what,
                                       const std::string& install) {
  std::string tried;
  for (const char* name : names) {
    if (void* handle = ::dlopen(name, flags); handle != nullptr) return handle;
    tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
  }
  return Error::Unavailable("cannot load " + what + " (" + tried + "); " + install);
}

// Sets `slot` to `symbol` of `handle`, typed as the slot is; false when the
// library has no such symbol.
template <typename Slot>
bool FindSymbol(void* handle, Slot& slot, const char* symbol) {
  slot = reinterpret_cast<Slot>(::dlsym(handle, symbol));
  return slot != nullptr;
}

}  // namespace unisched::posix
