// Rendezvous: every rank of a job meets on the c10d::TCPStore at MASTER_ADDR:MASTER_PORT and
// proves that it belongs to the same job before any process group is built. Every failure is
// an error naming the cause (port in use, master unreachable, mismatched world size, duplicate
// rank, a rank that never arrived) within the deadline, never a hang.
#pragma once
#include <c10/util/intrusive_ptr.h>

#include <chrono>

#include "distributed/env.h"

namespace c10d {
class Store;
}

namespace lmtrain::dist {

struct RendezvousResult {
  c10::intrusive_ptr<c10d::Store> store;  // job-scoped (prefixed) store for the process group
};

RendezvousResult rendezvous(const DistEnv& env, std::chrono::milliseconds timeout);

// True when `port` can be bound on all interfaces right now (used to report a taken
// MASTER_PORT clearly instead of c10d's generic socket error).
bool tcp_port_free(int port);

// A TCP port that is free right now (the kernel's pick for port 0), for --standalone and tests.
int pick_free_port();

// The local address other hosts reach us on when we talk to `master_addr`: loopback for a
// local master, else the source address of the route to it. Gloo listens on this address.
std::string local_address_towards(const std::string& master_addr, int port);

}  // namespace lmtrain::dist
