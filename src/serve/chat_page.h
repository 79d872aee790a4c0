// The chat page `lmtrain serve` gives at GET /: one self-contained HTML file (no script or
// style from elsewhere, so it works on a machine without internet), in the spirit of nanochat's
// chat_web. It keeps the conversation in the page, sends it to /v1/chat/completions with
// "stream": true and shows the answer as its server-sent events arrive.
#pragma once
#include <string>

namespace lmtrain::serve {

// needs_key: the server wants a bearer token; the page then asks for it (kept in the browser's
// localStorage).
std::string chat_page_html(const std::string& model_name, bool needs_key);

}  // namespace lmtrain::serve
