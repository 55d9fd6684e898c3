// The probes and the metrics scrape (/healthz, /readyz, /metrics): what
// orchestrators and Prometheus call, apart from the /v1 resources.

#include <nlohmann/json.hpp>

#include "api/call.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

using nlohmann::json;

void Api::Healthz(Call& call) {
  call.reply(Json(200, {{"status", "ok"}}));
}

void Api::Readyz(Call& call) {
  if (ctx_.ready && !ctx_.ready()) {
    call.reply(ErrorResponse(503, "not_ready", "the daemon is starting: recovery is not finished"));
    return;
  }
  call.reply(Json(200, {{"status", "ready"}}));
}

void Api::MetricsText(Call& call) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx_.metrics->Serialize();
  call.reply(std::move(r));
}

}  // namespace unisched::api
