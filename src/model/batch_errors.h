#pragma once
// What batch_script.cc (reading a script) and batch_resolve.cc (resolving
// its options) both refuse with: a 422 on the script.

#include <string>
#include <utility>

#include "unisched/common/status.h"

namespace unisched::model {

inline Error Invalid(std::string message) {
  return Error::Unprocessable("invalid_value", std::move(message), "script");
}

}  // namespace unisched::model
