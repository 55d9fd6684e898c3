#pragma once
// Answers shared by the endpoint files of the API.

#include <nlohmann/json.hpp>

#include "unisched/api/http.h"
#include "unisched/common/status.h"

namespace unisched::api {

int StatusOf(ErrorKind kind);
// The error shape of the contract, with the status of the error's kind.
HttpResponse FromError(const Error& e);
// A JSON answer; strings that are not UTF-8 (program output) have their bad
// bytes replaced by U+FFFD.
HttpResponse Json(int status, const nlohmann::json& body);

}  // namespace unisched::api
