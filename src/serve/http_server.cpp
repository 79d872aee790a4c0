#include "serve/http_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/stop_signal.h"
#include "serve/chat_page.h"
#include "serve/openai_json.h"

#ifdef LMTRAIN_SERVE
#include <httplib.h>
#endif

namespace lmtrain::serve {

size_t complete_utf8_prefix(const std::string& text) {
  // Walk back over at most 3 continuation bytes to the last lead byte; keep its character only
  // when all of its bytes are there.
  const size_t n = text.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return back >= need ? n : n - back;
  }
  return n;  // only continuation bytes at the end: not UTF-8 to wait for, send them as they are
}

#ifndef LMTRAIN_SERVE

bool server_available() { return false; }

void run_server(const ServerOptions&, const ChatBackend&, const std::function<void(int)>&) {
  throw UsageError(
      "this lmtrain was built without cpp-httplib (Debian's libcpp-httplib-dev): install it "
      "(scripts/setup.sh) and rebuild to use `lmtrain serve`");
}

#else

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type, const std::string& param = "") {
  res.status = status;
  res.set_content(error_json(message, type, param, status), "application/json");
}

// One request's answer: its id, the prompt's ids and the job decoding it.
struct Answer {
  std::string id;
  int64_t created = 0;
  int64_t prompt_tokens = 0;
  bool include_usage = false;
  std::shared_ptr<GenerationJob> job;
};

// The text of the new ids so far, without the end token.
std::string text_of(const ChatBackend& backend, std::vector<uint32_t> ids) {
  if (!ids.empty() && static_cast<int64_t>(ids.back()) == backend.end_id) ids.pop_back();
  return backend.decode(ids);
}

void answer_whole(const ServerOptions& options, const ChatBackend& backend, const Answer& a,
                  httplib::Response& res) {
  std::vector<uint32_t> all, more;
  for (bool done = false; !done;) {
    done = a.job->next(all.size(), more, std::chrono::milliseconds(200));
    all.insert(all.end(), more.begin(), more.end());
  }
  std::lock_guard<std::mutex> lock(a.job->mutex);
  if (!a.job->error.empty()) {
    send_error(res, 500, "generation failed: " + a.job->error, "server_error");
    return;
  }
  const Usage usage{a.prompt_tokens, static_cast<int64_t>(all.size())};
  res.set_content(completion_json(a.id, a.created, options.model_name, text_of(backend, all),
                                  a.job->stop, usage),
                  "application/json");
}

void answer_stream(const ServerOptions& options, const ChatBackend& backend, const Answer& a,
                   httplib::Response& res) {
  struct State {
    std::vector<uint32_t> ids;
    size_t sent_bytes = 0;
    bool first = true;
    bool finished = false;
  };
  auto state = std::make_shared<State>();
  const auto job = a.job;
  const std::string model = options.model_name;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, &backend](size_t, httplib::DataSink& sink) {
        auto event = [&](const std::string& json) {
          const std::string line = "data: " + json + "\n\n";
          return sink.write(line.data(), line.size());
        };
        std::vector<uint32_t> more;
        const bool done = job->next(state->ids.size(), more, std::chrono::milliseconds(100));
        state->ids.insert(state->ids.end(), more.begin(), more.end());
        std::string text;
        try {
          text = text_of(backend, state->ids);
        } catch (const std::exception& e) {
          // An id the tokenizer cannot decode (a barely trained model's id in the padding of
          // model.vocab_size): the answer ends with an error event, for an exception here
          // would escape httplib's thread and end the server.
          job->cancelled = true;
          event(error_json(std::string("generation failed: ") + e.what(), "server_error", "", 500));
          const std::string end = "data: [DONE]\n\n";
          sink.write(end.data(), end.size());
          sink.done();
          return true;
        }
        const size_t ready = done ? text.size() : complete_utf8_prefix(text);
        if (ready > state->sent_bytes || (state->first && done)) {
          const auto piece = text.substr(state->sent_bytes, ready - state->sent_bytes);
          if (!event(chunk_json(a.id, a.created, model, piece, state->first, std::nullopt,
                                std::nullopt))) {
            job->cancelled = true;
            return false;
          }
          state->first = false;
          state->sent_bytes = ready;
        }
        if (!done) return sink.is_writable();
        std::string error;
        infer::StopReason stop;
        {
          std::lock_guard<std::mutex> lock(job->mutex);
          error = job->error;
          stop = job->stop;
        }
        if (!error.empty()) {
          event(error_json("generation failed: " + error, "server_error", "", 500));
        } else {
          event(chunk_json(a.id, a.created, model, std::nullopt, false, stop, std::nullopt));
          if (a.include_usage) {
            event(chunk_json(a.id, a.created, model, std::nullopt, false, std::nullopt,
                             Usage{a.prompt_tokens, static_cast<int64_t>(state->ids.size())}));
          }
        }
        const std::string end = "data: [DONE]\n\n";
        sink.write(end.data(), end.size());
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

void chat_completions(const ServerOptions& options, const ChatBackend& backend,
                      std::atomic<uint64_t>& counter, const httplib::Request& req,
                      httplib::Response& res) {
  const ChatRequest r = parse_chat_request(req.body, options.limits);
  auto prompt = backend.render(r.messages);
  if (static_cast<int64_t>(prompt.size()) > options.max_prompt_tokens) {
    throw RequestError(400,
                       "the conversation renders to " + std::to_string(prompt.size()) +
                           " tokens, more than the " + std::to_string(options.max_prompt_tokens) +
                           " this server takes (the model's context less room to answer)",
                       "messages", "context_length_exceeded");
  }
  Answer a;
  a.id = "chatcmpl-lmtrain-" + std::to_string(counter.fetch_add(1));
  a.created = unix_now();
  a.prompt_tokens = static_cast<int64_t>(prompt.size());
  a.include_usage = r.include_usage;
  infer::SamplingOptions sampling;
  sampling.temperature = r.temperature;
  sampling.top_p = r.top_p;
  sampling.top_k = r.top_k;
  sampling.vocab_limit = backend.vocab_limit;
  sampling.logit_bias = r.logit_bias;
  a.job = backend.queue->submit(
      std::move(prompt), r.max_tokens.value_or(options.default_max_tokens), sampling, r.seed);
  if (r.stream) {
    answer_stream(options, backend, a, res);
  } else {
    answer_whole(options, backend, a, res);
  }
}

bool authorized(const ServerOptions& options, const httplib::Request& req) {
  if (options.api_key.empty()) return true;
  const std::string want = "Bearer " + options.api_key;
  const std::string got = req.get_header_value("Authorization");
  // Compared in time independent of where they differ.
  unsigned diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= want[i] ^ (i < got.size() ? got[i] : 0);
  return diff == 0;
}

}  // namespace

bool server_available() { return true; }

void run_server(const ServerOptions& options, const ChatBackend& backend,
                const std::function<void(int)>& on_listening) {
  httplib::Server server;
  const int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options.max_body_bytes);
  server.set_read_timeout(options.timeout_s, 0);
  server.set_write_timeout(options.timeout_s, 0);
  server.set_keep_alive_timeout(5);
  std::atomic<uint64_t> counter{1};

  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) == 0 && !authorized(options, req)) {
      send_error(res, 401, "a valid API key is required (Authorization: Bearer KEY)",
                 "invalid_request_error");
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const RequestError& e) {
          send_error(res, e.status, e.what(), e.type, e.param);
        } catch (const std::exception& e) {
          send_error(res, 500, std::string("internal error: ") + e.what(), "server_error");
        } catch (...) {
          send_error(res, 500, "internal error", "server_error");
        }
      });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error body
    const int status = res.status;
    std::string message = "no such route: " + req.method + " " + req.path;
    if (status == 413)
      message = "the request body is too large";
    else if (status == 400)
      message = "the request is malformed";
    else if (status == 405)
      message = "method not allowed";
    send_error(res, status, message, status == 404 ? "not_found" : "invalid_request_error");
  });

  server.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(chat_page_html(options.model_name, !options.api_key.empty()),
                    "text/html; charset=utf-8");
  });
  server.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    // running: rows decoding now; cancelled: requests whose client left before they ended.
    const auto stats = backend.queue->stats();
    res.set_content(
        "{\"status\": \"ok\", \"waiting\": " + std::to_string(backend.queue->waiting()) +
            ", \"running\": " + std::to_string(stats.running) +
            ", \"cancelled\": " + std::to_string(stats.cancelled) + "}",
        "application/json");
  });
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(models_json(options.model_name, unix_now()), "application/json");
  });
  server.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    chat_completions(options, backend, counter, req, res);
  });

  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) throw UsageError("serve: cannot listen on " + options.host + " (--host)");
  } else if (!server.bind_to_port(options.host, port)) {
    throw UsageError(
        log::format("serve: cannot listen on %s:%d (--host, --port): in use, or "
                    "not an address of this machine",
                    options.host.c_str(), port));
  }
  // SIGINT/SIGTERM stop the server: the handlers set a flag this thread watches.
  std::atomic<bool> serving{true};
  std::thread watcher([&] {
    while (serving && !core::stop_requested())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.stop();
  });
  on_listening(port);
  server.listen_after_bind();
  serving = false;
  watcher.join();
}

#endif

}  // namespace lmtrain::serve
