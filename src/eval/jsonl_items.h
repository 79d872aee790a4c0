// The items of an eval task's JSONL file: every non-blank line parsed strictly (a key twice is
// an error), with its "FILE:LINE" for messages. Shared by CORE tasks and chat tasks.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/fs.h"
#include "core/json_strict.h"

namespace lmtrain::eval {

// Calls fn(json, where) for each non-blank line of `path`, in order.
template <typename Fn>
void for_each_jsonl_item(const std::string& path, Fn&& fn) {
  const std::string text = core::read_file(path);
  int64_t line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    const std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line);
    fn(core::parse_json_strict(l, where), where);
  }
}

}  // namespace lmtrain::eval
