// JSON text from users' files (JSONL lines of prompts or documents), parsed strictly: besides
// malformed JSON, an object with the same key twice is an error. nlohmann::json keeps the last
// duplicate silently, so {"prompt": "a", "prompt": "b"} would run "b" without a word.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lmtrain::core {

// Throws Error (bad data, exit code 1) "`where`: not valid JSON (...)" or "`where`: key "k"
// appears twice in one object" (where: "FILE:LINE"): every caller reads a data file.
nlohmann::json parse_json_strict(std::string_view text, const std::string& where);

}  // namespace lmtrain::core
