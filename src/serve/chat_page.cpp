#include "serve/chat_page.h"

#include <nlohmann/json.hpp>

namespace lmtrain::serve {
namespace {

// The page; @MODEL@ and @NEEDS_KEY@ are filled in as JSON literals.
constexpr const char* kPage = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>lmtrain chat</title>
<style>
  :root { --fg: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; --user: #e8f0fe; --accent: #0b57d0; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: var(--fg); display: flex;
         flex-direction: column; height: 100vh; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 12px;
           align-items: center; }
  header h1 { font-size: 16px; margin: 0; flex: 1; }
  header span { color: var(--muted); font-size: 13px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; max-width: 820px; width: 100%; margin: 0 auto; }
  .msg { white-space: pre-wrap; padding: 10px 14px; border-radius: 12px; margin: 8px 0; }
  .user { background: var(--user); margin-left: 15%; }
  .assistant { border: 1px solid var(--line); margin-right: 15%; }
  .error { color: #b3261e; border: 1px solid #b3261e; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line);
         max-width: 820px; width: 100%; margin: 0 auto; }
  textarea { flex: 1; resize: none; font: inherit; padding: 8px; border: 1px solid var(--line);
             border-radius: 8px; height: 3.2em; }
  button { font: inherit; padding: 0 14px; border-radius: 8px; border: 1px solid var(--line);
           background: white; cursor: pointer; }
  button.primary { background: var(--accent); color: white; border-color: var(--accent); }
  label { font-size: 13px; color: var(--muted); }
  input { width: 4em; font: inherit; font-size: 13px; }
</style></head>
<body>
<header><h1>lmtrain chat <span id="model"></span></h1>
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
  <button id="clear" type="button" title="start a new conversation">New chat</button></header>
<div id="log"></div>
<form id="form"><textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
  <button id="send" class="primary" type="submit">Send</button></form>
<script>
const MODEL = @MODEL@, NEEDS_KEY = @NEEDS_KEY@;
const log = document.getElementById('log'), input = document.getElementById('input');
const send = document.getElementById('send');
document.getElementById('model').textContent = MODEL;
let messages = [];
function bubble(role, text) {
  const d = document.createElement('div');
  d.className = 'msg ' + role; d.textContent = text; log.appendChild(d);
  log.scrollTop = log.scrollHeight; return d;
}
function apiKey() {
  if (!NEEDS_KEY) return null;
  let k = localStorage.getItem('lmtrain_api_key');
  if (!k) { k = prompt('API key for this server'); if (k) localStorage.setItem('lmtrain_api_key', k); }
  return k;
}
async function ask(text) {
  messages.push({role: 'user', content: text});
  bubble('user', text);
  const out = bubble('assistant', '');
  out.dataset.state = 'streaming';
  send.disabled = true;
  const headers = {'Content-Type': 'application/json'};
  const key = apiKey(); if (key) headers['Authorization'] = 'Bearer ' + key;
  const temperature = parseFloat(document.getElementById('temperature').value) || 0;
  let answer = '';
  try {
    const res = await fetch('/v1/chat/completions', {method: 'POST', headers,
      body: JSON.stringify({model: MODEL, messages, stream: true, temperature})});
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      if (res.status === 401) localStorage.removeItem('lmtrain_api_key');
      throw new Error((body.error && body.error.message) || res.statusText);
    }
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const delta = j.choices && j.choices[0] && j.choices[0].delta;
        if (delta && delta.content) { answer += delta.content; out.textContent = answer;
          log.scrollTop = log.scrollHeight; }
      }
    }
    messages.push({role: 'assistant', content: answer});
    out.dataset.state = 'done';
  } catch (e) {
    messages.pop();
    out.className = 'msg error'; out.textContent = 'Error: ' + e.message;
    out.dataset.state = 'error';
  } finally { send.disabled = false; input.focus(); }
}
document.getElementById('form').addEventListener('submit', e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || send.disabled) return;
  input.value = ''; ask(text);
});
input.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault();
    document.getElementById('form').requestSubmit(); }
});
document.getElementById('clear').addEventListener('click', () => {
  messages = []; log.textContent = ''; input.focus();
});
input.focus();
</script></body></html>
)html";

void replace(std::string& s, const std::string& what, const std::string& with) {
  s.replace(s.find(what), what.size(), with);
}

}  // namespace

std::string chat_page_html(const std::string& model_name, bool needs_key) {
  std::string page = kPage;
  // As JSON inside a script: "</" is escaped so a model name cannot end the script element.
  std::string name =
      nlohmann::json(model_name).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  for (size_t at = name.find("</"); at != std::string::npos; at = name.find("</", at + 3)) {
    name.replace(at, 2, "<\\/");
  }
  replace(page, "@MODEL@", name);
  replace(page, "@NEEDS_KEY@", needs_key ? "true" : "false");
  return page;
}

}  // namespace lmtrain::serve
