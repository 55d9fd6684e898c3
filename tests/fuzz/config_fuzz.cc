// Fuzz target: the YAML config loader (src/config). The input is the text
// of a config file, given to LoadConfigText as `unisched server --config`
// and `unisched validate-config` do after reading the file: yaml-cpp's
// parse, then the typed readers of every section and the value rules.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "fuzz_check.h"
#include "unisched/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto loaded = unisched::config::LoadConfigText(text, "fuzz.yaml");
  if (const auto* errors = std::get_if<std::vector<unisched::config::ConfigError>>(&loaded)) {
    // A refusal always says why.
    FUZZ_CHECK(!errors->empty());
    for (const auto& error : *errors) FUZZ_CHECK(!error.ToString().empty());
  } else {
    const auto& config = std::get<unisched::config::Config>(loaded);
    // A loaded config still passes the value rules once its derived fields
    // are filled in, and carries its version (the content hash).
    FUZZ_CHECK(unisched::config::ValidateConfig(config).empty());
    FUZZ_CHECK(!config.version.empty());
  }
  return 0;
}
