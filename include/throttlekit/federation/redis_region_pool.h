// throttlekit/federation/redis_region_pool.h
//
// Provides `RedisRegionPool`: the region pool of the federated
// weighted-fair escrow (federation/region_pool.h, docs/federation.md,
// "Federated weighted-fair escrow") on a Redis server, for regions that are
// processes (target `throttlekit::redis`; hiredis underneath, never
// included here), on any Redis topology the coordinator speaks.
//
//     std::shared_ptr<RegionPool> pool =
//         *RedisRegionPool::create({.host = "global-redis"});
//
// Every step is one `EVALSHA` of a Lua script (the library's prelude, then
// the pool's step; `lua_script()`) that transcribes `region_pool_step`; a
// conformance test holds the two equal step for step, and on `NOSCRIPT`
// the script is sent with `EVAL`. Layout: hash `<prefix>:<key>` (default
// `tk:rfp:<key>`) with `ws` (the window's start), `w:<region>` (its weight)
// and `g:<region>` (its grant), expiring at the window's end plus
// `ttl_slack_ms`. Fair shares are exact in the script's doubles (long
// division; weights <= 2^31 and at most 1024 regions keep every
// intermediate below 2^53).
//
// Design: the steps run on a `RedisCoordinator`'s pipelined connections
// (redis/redis_coordinator.h), so the pool goes wherever that coordinator
// goes: one server, Redis Cluster (each key's step at its slot's primary,
// MOVED and ASK followed) or a Sentinel-guarded primary (followed through
// failovers), with its deadlines and `durable_writes`. Pass the
// coordinator the fleet already uses in `coordinator`, or let the pool
// create its own from `host`, `port` and the rest (one connection).
// Deadlines: each call returns within the coordinator's `command_timeout`
// (plus `connect_timeout` when it opens the connection itself).
// `grant_async` sends the step without waiting (the coordinator's
// asynchronous path) and completes from the thread that reads the reply.
//
// Errors, never a crash or an exception: kInvalidArgument (bad options or
// arguments, before any I/O), kUnavailable (cannot connect, connection
// lost, server error, no primary), kDeadlineExceeded (no answer in time;
// the step may or may not have run, which a `FederatedFairEscrow`
// tolerates: it counts a grant it did not see as spent),
// kFailedPrecondition (the key holds another layout), kResourceExhausted
// (a new region in a window that holds 1024).
//
// Thread-safety: every method is safe to call concurrently. The pool must
// outlive every call in progress.

#ifndef THROTTLEKIT_FEDERATION_REDIS_REGION_POOL_H_
#define THROTTLEKIT_FEDERATION_REDIS_REGION_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "throttlekit/core/ttl_slack.h"
#include "throttlekit/federation/region_pool.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {

struct RedisRegionPoolOptions {
  // The coordinator whose connections run the steps (any topology). When
  // set, `host`, `port`, `username`, `password`, `database` and the two
  // timeouts are unused (the coordinator's own apply) and must keep their
  // defaults; `prefix` and `ttl_slack_ms` are the pool's.
  std::shared_ptr<RedisCoordinator> coordinator;
  // Without `coordinator`: the server address (IPv4/IPv6 literal or host
  // name) and port 1..65535 of the pool's own coordinator.
  std::string host = "127.0.0.1";
  int port = 6379;
  // ACL user for AUTH (needs a password); empty uses the default user.
  std::string username;
  // Password for AUTH; empty sends no AUTH.
  std::string password;
  // The logical database (SELECT), 0..1000000.
  int database = 0;
  // Bound on establishing a connection (TCP, AUTH, SELECT, SCRIPT LOAD).
  absl::Duration connect_timeout = absl::Milliseconds(1000);
  // Bound on one call, from the moment it is queued to its reply.
  absl::Duration command_timeout = absl::Milliseconds(250);
  // Keys are `prefix:key`; 1 .. 256 bytes.
  std::string prefix = "tk:rfp";
  // Added to every TTL (ms, 0 .. 2^53-1), so a caller's `now` up to that
  // much behind the server's clock never finds its window gone
  // (core/ttl_slack.h). Answers for a `now` that is not stale do not
  // depend on it.
  int64_t ttl_slack_ms = kDefaultTtlSlackMs;
};

class RedisRegionPool final : public RegionPool {
 public:
  // Validates `options` (errors name the field and its bound). Connects
  // lazily: creating a pool never fails because the server is down.
  // kInvalidArgument when `coordinator` is set together with a server
  // field.
  static absl::StatusOr<std::unique_ptr<RedisRegionPool>> create(
      const RedisRegionPoolOptions& options);

  ~RedisRegionPool() override;
  RedisRegionPool(const RedisRegionPool&) = delete;
  RedisRegionPool& operator=(const RedisRegionPool&) = delete;

  std::string_view backend() const noexcept override { return "redis"; }

  // The full Lua text the pool sends (prelude and step), for operators
  // who preload scripts and for tools that call it directly. KEYS[1] the
  // hash; ARGV: now (0: the Redis clock), want, region, ttl slack, limit,
  // window ms, weight, the most regions; reply {granted, previous, fair
  // share, total weight, window start}.
  static std::string_view lua_script();

  const RedisRegionPoolOptions& options() const noexcept;

  class Impl;

 protected:
  absl::StatusOr<RegionPoolGrant> do_grant(const LeaseBudget& budget,
                                           std::string_view key,
                                           std::string_view region,
                                           int64_t weight, int64_t want,
                                           int64_t now_ms) override;
  absl::StatusOr<RegionPoolState> do_state(std::string_view key) override;
  void do_grant_async(const LeaseBudget& budget, std::string_view key,
                      std::string_view region, int64_t weight, int64_t want,
                      int64_t now_ms,
                      Completion<RegionPoolGrant> on_done) override;

 private:
  explicit RedisRegionPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_FEDERATION_REDIS_REGION_POOL_H_
