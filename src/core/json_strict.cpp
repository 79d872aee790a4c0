#include "core/json_strict.h"

#include <set>
#include <vector>

#include "core/error.h"

namespace lmtrain::core {

nlohmann::json parse_json_strict(std::string_view text, const std::string& where) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys;  // the keys seen so far, per open object
  auto check = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key) {
      const auto key = parsed.get<std::string>();
      if (!keys.back().insert(key).second) {
        throw Error(where + ": key \"" + key +
                    "\" appears twice in one object (which one is meant is ambiguous)");
      }
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    throw Error(where + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace lmtrain::core
