// The web console (docs/console.md): its three files, compiled into the
// daemon, served at / and /console/. They are public (the console asks for a
// token and then calls the API with it, as any client); a strict
// Content-Security-Policy allows scripts, styles and connections to this
// origin only, and no inline script or style attribute.

#include <string>

#include "api/call.h"
#include "api/console_assets.h"
#include "api/responses.h"
#include "unisched/api/api.h"

namespace unisched::api {

namespace {

constexpr const char* kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

HttpResponse Asset(const ConsoleAsset& asset) {
  HttpResponse r;
  r.content_type = std::string(asset.content_type);
  r.body = std::string(asset.bytes);
  r.headers.emplace_back("Content-Security-Policy", kPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  // Revalidated each time: a new daemon serves its own bundle at once.
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace

void Api::Console(Call& call) {
  call.reply(Asset(*FindConsoleAsset("index.html")));
}

void Api::ConsoleFile(Call& call) {
  const std::string& name = call.Param("file");
  const ConsoleAsset* asset = name == "index.html" ? nullptr : FindConsoleAsset(name);
  if (asset == nullptr) {
    call.reply(ErrorResponse(404, "not_found", "the console has no file '" + name + "': app.js and app.css"));
    return;
  }
  call.reply(Asset(*asset));
}

}  // namespace unisched::api
