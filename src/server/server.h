// src/server/server.h
//
// Provides `Server`: throttlekit-server's gRPC door (docs/server.md). It
// serves `throttlekit.v1.RateLimiter` (proto/throttlekit/v1/throttlekit.proto)
// over the configured `Policies`, `throttlekit.v1.Fleet` (Tier-2 leases of
// federated policies), `throttlekit.v1.Monitor` (GetSnapshot, Watch),
// Envoy's global rate-limit service
// (`envoy.service.ratelimit.v3.RateLimitService`, envoy_rls.h,
// docs/envoy.md) over the configured domains, Envoy's rate limit quota
// service (`envoy.service.rate_limit_quota.v3.RateLimitQuotaService`,
// quota_door.h, docs/rlqs.md), and the standard gRPC health
// service, in plaintext or over TLS (`ServerOptions`).
//
//     auto policies = Policies::create(*config, store);
//     auto server = Server::start(*std::move(policies), {.listen =
//     "127.0.0.1:0"}); int port = (*server)->port();
//     ...
//     (*server)->shutdown();
//
// Statuses: an unknown policy is NOT_FOUND; an RPC the policy does not
// serve is UNIMPLEMENTED (naming what it serves); a bad argument (empty or
// oversized key, negative or absurd cost, too many keys) is
// INVALID_ARGUMENT; a store outage is UNAVAILABLE or DEADLINE_EXCEEDED as
// the library reports it. A cost or tokens of 0 means 1 (proto3's default).
//
// Thread-safety: every method is safe to call concurrently; RPCs run on
// gRPC's threads.

#ifndef THROTTLEKIT_SRC_SERVER_SERVER_H_
#define THROTTLEKIT_SRC_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "policies.h"
#include "slot_leases.h"

namespace throttlekit::server {

struct ServerOptions {
  // host:port to listen on; port 0 picks a free one (see `port()`).
  std::string listen = "127.0.0.1:50051";
  // The clock of the Admit slot leases (policies carry their own).
  ServerClock clock;
  // Reclaims expired Admit slots on a background thread; tests that move a
  // manual clock call `leases().reclaim_expired()` instead.
  bool reaper = true;
  // Fleet.Reserve hands out budget, so it answers loopback callers only,
  // unless this secret is set and the caller sends it as `x-fleet-secret`
  // call metadata (pair it with TLS in front of the server: over plain TCP
  // the secret travels in clear).
  std::string fleet_secret;
  // Monitor.GetSnapshot shows keys (which may be personal data), so it too
  // answers loopback callers only unless this secret is sent as
  // `x-monitor-secret`.
  std::string monitor_secret;
  // Monitor.Watch: a denial or shutdown wakes a watcher at once; with
  // nothing to send, it looks this often (ms, at least 1) whether its
  // client has gone, and frees its place among the 16 if so.
  int64_t watch_cancel_check_ms = 100;
  // The most threads gRPC's synchronous RPCs may use (0: gRPC's default,
  // unbounded). `Check` runs on the callback API and needs none of them;
  // the benchmarks cap the others at 2 to set the blocking door beside it.
  int sync_threads = 0;
  // The most threads that run `Check`s of engines without an asynchronous
  // form that wait on the store (fair escrows over a store), so that no
  // gRPC callback thread waits on one; 1 .. 4096. Started on demand;
  // checks beyond them queue.
  int blocking_threads = 16;
  // TLS: the server's certificate chain and private key, PEM. Both empty
  // (the default): plaintext. With `tls_client_ca` (PEM) too, every client
  // must present a certificate that CA signed (mutual TLS).
  std::string tls_cert_chain;
  std::string tls_private_key;
  std::string tls_client_ca;
};

// True for a gRPC peer string (`ServerContext::peer()`) on the loopback
// interface: `ipv4:127.x.y.z:port`, `ipv6:[::1]:port`, an IPv4-mapped
// `ipv6:[::ffff:127.x.y.z]:port`, or a `unix:` socket.
bool is_loopback_peer(std::string_view peer);

class QuotaDoor;

class Server {
 public:
  // Listens and serves; kUnavailable naming the address if it cannot bind
  // (or cannot use the TLS certificate and key), kInvalidArgument for TLS
  // options that do not go together.
  static absl::StatusOr<std::unique_ptr<Server>> start(
      std::unique_ptr<Policies> policies, ServerOptions options);

  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port it listens on.
  int port() const;
  // Stops accepting RPCs, finishes those in flight and stops the reaper.
  // Idempotent.
  void shutdown();
  // Blocks until `shutdown()`.
  void wait();

  Policies& policies();
  SlotLeases& leases();
  // The rate limit quota service's state (quota_door.h, docs/rlqs.md).
  QuotaDoor& quota_door();
  // Threads the blocking pool has started (ServerOptions::blocking_threads):
  // 0 while every RPC served has run on an asynchronous engine.
  size_t blocking_pool_threads() const;

  // The Prometheus text exposition (version 0.0.4) of what every policy
  // decided, the Admit slots, the admissions' concurrency and the store's
  // health (docs/server.md, "Metrics").
  std::string prometheus_text();
  // True when the store answers a ping (always, on the embedded store).
  bool healthy();
  // True once the shared store has been ready (its connections open and
  // set up; always, on the embedded store); until then the gRPC health
  // service answers NOT_SERVING.
  bool store_ready() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_SERVER_H_
