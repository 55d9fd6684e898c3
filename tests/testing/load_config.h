#pragma once
// A config from YAML text for a test: every error a failure of the test.
// (Header-only: a test that uses it links unisched_config already.)

#include <gtest/gtest.h>

#include <string_view>
#include <variant>

#include "unisched/config/config.h"

namespace unisched::testing {

inline config::Config LoadConfigOrFail(std::string_view yaml) {
  auto loaded = config::LoadConfigText(yaml);
  if (auto* errors = std::get_if<std::vector<config::ConfigError>>(&loaded)) {
    for (const auto& e : *errors) ADD_FAILURE() << e.ToString();
    return {};
  }
  return std::get<config::Config>(std::move(loaded));
}

}  // namespace unisched::testing
