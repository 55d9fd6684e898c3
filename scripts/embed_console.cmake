# Writes OUTPUT, a C++ file defining unisched::api::FindConsoleAsset(): the
# files of DIR (the web console's committed bundle, src/console/dist) by
# name, with their bytes and content type (src/api/console_assets.h).
set(entries "")
set(arrays "")
set(i 0)
foreach(name index.html app.js app.css)
  file(READ ${DIR}/${name} content HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  else()
    set(type "text/css; charset=utf-8")
  endif()
  # unsigned: UTF-8 text has bytes above 127, which a char initializer may not narrow to.
  string(APPEND arrays "const unsigned char kFile${i}[] = {${bytes} 0};\n")
  string(APPEND entries "    {\"${name}\", \"${type}\", {reinterpret_cast<const char*>(kFile${i}), sizeof kFile${i} - 1}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE ${OUTPUT} "// Generated from ${DIR}; do not edit.\n#include \"api/console_assets.h\"\nnamespace unisched::api {\nnamespace {\n${arrays}const ConsoleAsset kAssets[] = {\n${entries}};\n}  // namespace\nconst ConsoleAsset* FindConsoleAsset(std::string_view name) {\n  for (const auto& a : kAssets) {\n    if (a.name == name) return &a;\n  }\n  return nullptr;\n}\n}  // namespace unisched::api\n")
