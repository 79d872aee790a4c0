#include "core/text_list.h"

namespace lmtrain::core {

std::string trim_blanks(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    items.push_back(trim_blanks(text.substr(start, end == std::string::npos ? end : end - start)));
    if (end == std::string::npos) return items;
    start = end + 1;
  }
}

}  // namespace lmtrain::core
