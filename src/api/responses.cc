// The answers every endpoint file shares: the status of each error kind, the
// contract's error shape and JSON bodies (responses.h).

#include "api/responses.h"

#include <nlohmann/json.hpp>

namespace unisched::api {

using nlohmann::json;

int StatusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return 400;
    case ErrorKind::kUnauthenticated:
      return 401;
    case ErrorKind::kForbidden:
      return 403;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kConflict:
      return 409;
    case ErrorKind::kTooLarge:
      return 413;
    case ErrorKind::kUnprocessable:
      return 422;
    case ErrorKind::kRateLimited:
      return 429;
    case ErrorKind::kUnavailable:
      return 503;
    case ErrorKind::kInternal:
      break;
  }
  return 500;
}

HttpResponse FromError(const Error& e) {
  return ErrorResponse(StatusOf(e.kind), e.code, e.message, e.field);
}

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace unisched::api
