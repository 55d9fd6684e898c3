# Writes OUTPUT, a C++ file defining unisched::config::EmbeddedDefaultConfig()
# that returns the bytes of INPUT.
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\nnamespace unisched::config {\nnamespace {\nconstexpr char kText[] = {${bytes} 0};\n}\nstd::string_view EmbeddedDefaultConfig() { return {kText, sizeof kText - 1}; }\n}  // namespace unisched::config\n")
