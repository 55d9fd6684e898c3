#pragma once
// The web console's files (docs/console.md), compiled into the daemon from
// src/console/dist by scripts/embed_console.cmake: served with no file
// system and no network.

#include <string_view>

namespace unisched::api {

struct ConsoleAsset {
  std::string_view name;  // index.html, app.js, app.css
  std::string_view content_type;
  std::string_view bytes;
};

// The file called `name`, or nullptr.
const ConsoleAsset* FindConsoleAsset(std::string_view name);

}  // namespace unisched::api
