#include "distributed/rendezvous.h"

#include <arpa/inet.h>
#include <c10/util/Logging.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/error.h"
#include "core/file_lock.h"
#include "core/log.h"
#include "distributed/c10d_error.h"

namespace lmtrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(std::chrono::milliseconds ms) {
  return log::format("%.3g s", ms.count() / 1000.0);
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// c10d logs every failed connection attempt, with a C++ backtrace, before it throws; our error
// says the same in one line. Quiet while connecting, unless the user asked for c10's logs.
class QuietC10Logs {
 public:
  QuietC10Logs() : saved_(FLAGS_caffe2_log_level) {
    if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 3;  // FATAL only
  }
  ~QuietC10Logs() { FLAGS_caffe2_log_level = saved_; }
  QuietC10Logs(const QuietC10Logs&) = delete;
  QuietC10Logs& operator=(const QuietC10Logs&) = delete;

 private:
  int saved_;
};

// Whether anything accepts a TCP connection at addr:port within `limit`.
bool tcp_answers(const std::string& addr, int port, std::chrono::milliseconds limit) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return false;
  }
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = ::poll(&p, 1, static_cast<int>(limit.count())) == 1 &&
           ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

// A c10d client: c10d's constructor pings the server and waits for the answer without a
// deadline, so a service on MASTER_PORT that accepts and never answers would hang it forever.
// It runs on a thread of its own; nullptr when it has not finished within `limit` (the thread is
// left behind, blocked, and dies with the process).
c10::intrusive_ptr<c10d::Store> client_with_deadline(const std::string& addr,
                                                     const c10d::TCPStoreOptions& opts,
                                                     std::chrono::milliseconds limit) {
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    c10::intrusive_ptr<c10d::Store> store;
    std::exception_ptr error;
  };
  auto p = std::make_shared<Pending>();
  std::thread([p, addr, opts] {
    c10::intrusive_ptr<c10d::Store> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(addr, opts);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(p->mu);
    p->store = std::move(store);
    p->error = error;
    p->done = true;
    p->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(p->mu);
  if (!p->cv.wait_for(lock, limit, [&] { return p->done; })) return {};
  if (p->error) std::rethrow_exception(p->error);
  return p->store;
}

std::string join_key(int rank) { return "lmtrain/rdzv/rank" + std::to_string(rank); }
std::string claim_key(int rank) { return "lmtrain/rdzv/claims" + std::to_string(rank); }
const char* kVerdictKey = "lmtrain/rdzv/verdict";
const char* kReadKey = "lmtrain/rdzv/verdict_read";  // ranks that have read the verdict

// What a rank announces: "<world_size> <host> <pid>".
struct Announcement {
  int world_size = 0;
  std::string host;
  long pid = 0;
  std::string who(int rank) const {
    return "rank " + std::to_string(rank) + " (" + host + ", pid " + std::to_string(pid) + ")";
  }
};

Announcement parse_announcement(const std::string& s) {
  Announcement a;
  std::istringstream in(s);
  in >> a.world_size >> a.host >> a.pid;
  return a;
}

c10::intrusive_ptr<c10d::Store> connect_store(const DistEnv& env,
                                              std::chrono::milliseconds timeout) {
  const bool server = env.rank == 0 && !env.use_agent_store;
  if (server && !tcp_port_free(env.master_port)) {
    throw Error(log::format(
        "rendezvous: MASTER_PORT %d is already in use on this machine (another job or a "
        "leftover process?): pick a free port with --master_port",
        env.master_port));
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = server;
  opts.waitWorkers = false;  // we check arrivals ourselves, naming the missing ranks
  opts.timeout = timeout;
  opts.multiTenant = true;
  const QuietC10Logs quiet;
  std::string what;
  try {
    if (server) return c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    // c10d gives up connecting after `timeout`; the margin is for the answer to its ping.
    const auto limit = timeout + std::chrono::milliseconds(5000);
    if (auto store = client_with_deadline(env.master_addr, opts, limit)) return store;
    what = "it accepted the connection but sent no answer within " + seconds(limit);
  } catch (const std::exception& e) {
    what = brief_error(e);
    if (server) {
      throw Error(log::format("rendezvous: rank 0 could not host the TCPStore on port %d: %s",
                              env.master_port, what.c_str()));
    }
  }
  // Something listens there (it accepted a connection), yet c10d's handshake failed: another
  // service on that port, or a proxy. Not the "master unreachable" of a rank 0 not yet started.
  if (tcp_answers(env.master_addr, env.master_port, std::chrono::milliseconds(2000))) {
    throw Error(
        log::format("rendezvous: rank %d: %s:%d (MASTER_ADDR:MASTER_PORT) answered, but not as an "
                    "lmtrain/c10d store (another service on that port, or a proxy?): %s",
                    env.rank, env.master_addr.c_str(), env.master_port, what.c_str()));
  }
  throw Error(log::format(
      "rendezvous: rank %d could not reach the master at %s:%d within %s (is rank 0 running, "
      "and are MASTER_ADDR/MASTER_PORT right?): %s",
      env.rank, env.master_addr.c_str(), env.master_port, seconds(timeout).c_str(), what.c_str()));
}

// Rank 0: waits for every rank's announcement and checks that they agree; the verdict ("ok" or
// the error message) is published for the other ranks.
std::string judge_arrivals(c10d::Store& store, const DistEnv& env,
                           std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int r = 0; r < env.world_size; ++r) {
      if (!store.check({join_key(r)})) {
        missing.push_back(r);
      } else if (store.add(claim_key(r), 0) > 1) {
        const auto a = parse_announcement(text(store.get(join_key(r))));
        return log::format("rendezvous: rank %d was claimed by more than one process (last: %s)", r,
                           a.who(r).c_str());
      }
    }
    if (missing.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 16; ++i) {
      list += (i ? ", " : "") + std::to_string(missing[i]);
    }
    if (missing.size() > 16) list += ", ...";
    return log::format(
        "rendezvous: %s %s of %d did not join within %s (not started, crashed, or "
        "pointed at another MASTER_ADDR:MASTER_PORT?)",
        missing.size() == 1 ? "rank" : "ranks", list.c_str(), env.world_size,
        seconds(timeout).c_str());
  }
  for (int r = 0; r < env.world_size; ++r) {
    const auto a = parse_announcement(text(store.get(join_key(r))));
    if (a.world_size != env.world_size) {
      return log::format(
          "rendezvous: %s was started with a world size of %d, but rank 0 with %d: "
          "every rank of a job needs the same WORLD_SIZE",
          a.who(r).c_str(), a.world_size, env.world_size);
    }
  }
  return "ok";
}

}  // namespace

bool tcp_port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;  // can't tell; let c10d report
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno != EADDRINUSE;
  ::close(fd);
  return ok;
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw Error(std::string("cannot find a free TCP port: ") + std::strerror(errno));
  return ntohs(addr.sin_port);
}

std::string local_address_towards(const std::string& master_addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(master_addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    throw Error("cannot resolve MASTER_ADDR '" + master_addr + "'");
  }
  auto* target = reinterpret_cast<sockaddr_in*>(res->ai_addr);
  std::string out;
  if ((ntohl(target->sin_addr.s_addr) >> 24) == 127) {
    out = "127.0.0.1";
  } else {
    // connect() on a UDP socket sends nothing; it only asks the kernel for the route.
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf));
      out = buf;
    }
    if (fd >= 0) ::close(fd);
  }
  freeaddrinfo(res);
  if (out.empty()) throw Error("no network route from this host to MASTER_ADDR " + master_addr);
  return out;
}

RendezvousResult rendezvous(const DistEnv& env, std::chrono::milliseconds timeout) {
  auto base = connect_store(env, timeout);
  c10::intrusive_ptr<c10d::Store> store = base;
  if (env.use_agent_store) {
    // torchrun's agent store outlives restarts: scope keys by attempt, as torch.distributed does.
    store = c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(env.restart_count), base);
  }
  store->set(join_key(env.rank), bytes(std::to_string(env.world_size) + " " + core::host_name() +
                                       " " + std::to_string(::getpid())));
  if (store->add(claim_key(env.rank), 1) > 1) {
    throw Error(log::format(
        "rendezvous: rank %d is already taken at %s:%d, by another process of this job or by "
        "another job whose rank 0 hosts a store on that port (two jobs on one MASTER_PORT?)",
        env.rank, env.master_addr.c_str(), env.master_port));
  }
  if (env.rank == 0) {
    const std::string verdict = judge_arrivals(*store, env, timeout);
    store->set(kVerdictKey, bytes(verdict));
    if (verdict != "ok") {
      // Rank 0's process hosts the store: exiting at once could cut the others off before they
      // read the verdict. Wait (bounded) until every rank that joined has read it.
      int64_t joined = 0;
      for (int r = 1; r < env.world_size; ++r) joined += store->check({join_key(r)}) ? 1 : 0;
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (store->add(kReadKey, 0) < joined && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      throw Error(verdict);
    }
  } else {
    // Rank 0 answers within `timeout`; the margin lets its precise verdict arrive first.
    const auto wait = timeout + std::chrono::milliseconds(5000);
    try {
      store->wait({kVerdictKey}, wait);
    } catch (const std::exception& e) {
      throw Error(log::format("rendezvous: rank %d got no answer from rank 0 within %s: %s",
                              env.rank, seconds(wait).c_str(), brief_error(e).c_str()));
    }
    std::string verdict;
    try {
      verdict = text(store->get(kVerdictKey));
      store->add(kReadKey, 1);
    } catch (const std::exception& e) {
      throw Error(
          log::format("rendezvous: rank %d lost rank 0 while reading its verdict (see rank "
                      "0's error): %s",
                      env.rank, brief_error(e).c_str()));
    }
    if (verdict != "ok") throw Error(verdict);
  }
  return {c10::make_intrusive<c10d::PrefixStore>("lmtrain/pg", store)};
}

}  // namespace lmtrain::dist
