// Rendezvous failures with real processes: each ends in an error that names the cause (and the
// rank), within the configured deadline, instead of a hang. The rendezvous happens before any
// data is read, so these runs need no dataset.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "e2e/dist_harness.h"
#include "test_util.h"

namespace lmtrain::testing {
namespace {

// `lmtrain train` as one rank, with a short rendezvous deadline; `timeout` is only a guard
// against a hang (it fails the test with exit code 124).
std::string rank_cmd(int rank, int world, int port, const std::string& extra = "") {
  return "RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " timeout 60 " +
         lmtrain_binary() + " train --data.dir=/nonexistent --max_steps=1" +
         " --dist.init_timeout_s=2" + extra;
}

// Another service on MASTER_PORT, listening on loopback: it sends garbage to every client,
// closes every connection at once, or accepts and never answers.
class FakeService {
 public:
  enum class Mode { kGarbage, kClose, kSilent };
  explicit FakeService(Mode mode) : mode_(mode) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("FakeService: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeService() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(fd_);
    for (int c : clients_) ::close(c);
  }
  int port() const { return port_; }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      if (mode_ == Mode::kClose) {
        ::close(c);
        continue;
      }
      if (mode_ == Mode::kGarbage) {
        const std::string reply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        [[maybe_unused]] auto n = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      clients_.push_back(c);
    }
  }
  Mode mode_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::vector<int> clients_;
};

TEST(Rendezvous, ServiceThatIsNotAStoreIsNamed) {
  for (auto mode :
       {FakeService::Mode::kGarbage, FakeService::Mode::kClose, FakeService::Mode::kSilent}) {
    FakeService service(mode);
    const auto r = run_command(rank_cmd(1, 2, service.port()));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "127.0.0.1:" + std::to_string(service.port()) +
                                       " (MASTER_ADDR:MASTER_PORT) answered, but not as an "
                                       "lmtrain/c10d store"))
        << static_cast<int>(mode) << "\n"
        << r.output;
    EXPECT_FALSE(contains(r.output, "already taken")) << r.output;
  }
}

TEST(Rendezvous, LauncherNamesTheRootCauseOnItsLastLine) {
  FakeService service(FakeService::Mode::kGarbage);
  const std::string port = std::to_string(service.port());
  const auto r = run_command("timeout 120 " + lmtrain_binary() +
                             " launch --nproc_per_node=2 --master_port=" + port +
                             " -- train --data.dir=/nonexistent --max_steps=1"
                             " --dist.init_timeout_s=2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::string last = r.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') + 1);
  // Rank 0 finds the port taken, rank 1 finds a service that is no store: either is the cause.
  EXPECT_TRUE(contains(last, "launch: rank ")) << r.output;
  EXPECT_TRUE(contains(last, "MASTER_PORT " + port + " is already in use") ||
              contains(last, ":" + port + " (MASTER_ADDR:MASTER_PORT) answered, but not as"))
      << "last line: " << last << "\n"
      << r.output;
}

TEST(Rendezvous, PortAlreadyInUseIsNamed) {
  const int port = free_port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  const auto r = run_command(rank_cmd(0, 2, port));
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "MASTER_PORT " + std::to_string(port) + " is already in use"))
      << r.output;
}

TEST(Rendezvous, UnreachableMasterIsNamed) {
  const int port = free_port();  // nobody listens there
  const auto r = run_command(rank_cmd(1, 2, port));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 could not reach the master at 127.0.0.1:" +
                                     std::to_string(port) + " within 2 s"))
      << r.output;
  // Our one line only: no c10d log lines with C++ backtraces (or glog's preamble) before it.
  for (const char* noise :
       {"[c10d]", "Exception raised from", "Logging before InitGoogleLogging"}) {
    EXPECT_FALSE(contains(r.output, noise)) << r.output;
  }
}

TEST(Rendezvous, RankThatNeverArrivesIsNamed) {
  const auto r = run_command(rank_cmd(0, 3, free_port()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ranks 1, 2 of 3 did not join within 2 s")) << r.output;
}

TEST(Rendezvous, MismatchedWorldSizeIsNamedOnEveryRank) {
  const int port = free_port();
  const auto rs = run_parallel({rank_cmd(0, 2, port), rank_cmd(1, 3, port)});
  for (const auto& r : rs) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "was started with a world size of 3, but rank 0 with 2"))
        << r.output;
  }
}

TEST(Rendezvous, DuplicateRankIsNamed) {
  const int port = free_port();
  // Rank 2 never comes, so rank 0 keeps watching while both "rank 1" processes register.
  const auto rs = run_parallel({rank_cmd(0, 3, port), rank_cmd(1, 3, port), rank_cmd(1, 3, port)});
  const std::string all = rs[0].output + rs[1].output + rs[2].output;
  EXPECT_TRUE(contains(all, "rank 1 is already taken at 127.0.0.1:" + std::to_string(port)) ||
              contains(all, "rank 1 was claimed by more than one process"))
      << all;
  for (const auto& r : rs) EXPECT_NE(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace lmtrain::testing
