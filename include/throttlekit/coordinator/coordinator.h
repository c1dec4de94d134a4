// throttlekit/coordinator/coordinator.h
//
// Provides `Coordinator`, the one abstract interface through which every
// distributed engine reaches shared state (docs/architecture.md, "The
// Coordinator"), so engines never know which store they run on. Backends:
// `MemoryCoordinator` (in-process reference and embedded default),
// `RedisCoordinator` (throttlekit::redis) and `PostgresCoordinator`
// (throttlekit::postgres). All three return identical decisions for the same
// (state, now, cost) (docs/conformance.md).
//
// Capability groups
// - Strategy step: `check` / `peek` / `forecast` / `reset` of any strategy in
//   `AnyStrategy` on one key, atomically with respect to every other caller
//   of the same store (other threads and other processes).
// - Leases: `lease` takes up to `want` credits from the key's current window
//   of a `LeaseBudget`, with the window read on the store's clock;
//   `give_back` returns credits to the window they came from, idempotently
//   per token (lease.h).
// - Federation (docs/federation.md): `lease_windowed` takes credits from
//   the current window of a per-key budget and returns the store-clock
//   window end with the grant, atomically; `reconcile` gives a window's
//   leftover back once per (window, token) and forfeits the leftover of a
//   rolled window (federation_core.h; the layout of the original, so other
//   languages' fleets can share it).
// - Regional escrow (federation's L2, escrow_core.h): `escrow_take`,
//   `escrow_refill`, `escrow_release` over one region's balance of a key,
//   on the store's clock (memory and Redis).
// - Clock: `now_ms`, the store's clock, for skew-proof boundaries.
// - Health: `ping` (and `is_healthy`), one cheap round trip.
// - Heartbeats (distributed concurrency): `heartbeat` runs one coordinator
//   step (heartbeat_core.h) for a node's report over the key's node table,
//   on the store's clock; `heartbeat_nodes` reads the table
//   (docs/distributed_concurrency.md).
// - Fused admission (GCRA + token bucket in one step) is Redis-only:
//   `RedisCoordinator::fused_check` (docs/admission.md).
//
// Conventions
// - Keys are store keys: the caller has already joined its prefix
//   (`join_key`). 1 byte .. 1 MiB, any bytes.
// - `now_ms == 0` means "use the store's clock" (docs/semantics.md, "Redis
//   representation"); otherwise `now_ms` must be in [1, 2^53-1].
// - Every call is bounded by the backend's command deadline. Each verb
//   has a blocking form and, for the verbs a fleet sends in flight
//   (`check`, `lease`, `give_back`, `now_ms`, `heartbeat`, federation's
//   `lease_windowed`, `reconcile`, `escrow_take`, `escrow_refill`), a form
//   without waiting, `*_async` (core/completion.h, docs/async.md): Redis
//   queues them on its pipelined connections, Postgres on a connection in
//   libpq's pipeline mode (all but the escrow's, which Postgres does not
//   have), and each completes them from the reply; memory, whose steps
//   need no I/O, completes inline. Both forms come from one hook per verb
//   (the protected hooks below).
//   Errors are statuses, never exceptions and never a decision:
//   kInvalidArgument (bad argument, checked here before any I/O),
//   kUnavailable (store unreachable or failed), kDeadlineExceeded (the store
//   did not answer in time), kFailedPrecondition (the key holds another
//   strategy's state, where the backend can tell). Turning an outage into a
//   decision is the caller's explicit choice (`FailPolicy`).
// - One key, one strategy: a key is only ever used with one strategy and one
//   set of options (as in the TypeScript library).
//
// Thread-safety: implementations are safe to call from many threads.

#ifndef THROTTLEKIT_COORDINATOR_COORDINATOR_H_
#define THROTTLEKIT_COORDINATOR_COORDINATOR_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/escrow_core.h"
#include "throttlekit/coordinator/federation_core.h"
#include "throttlekit/coordinator/heartbeat_core.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/completion_latch.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"

namespace throttlekit {

// The longest idempotency token `give_back` accepts.
inline constexpr size_t kMaxLeaseTokenBytes = 256;

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Runs one strategy check of `cost` on `key` at `now_ms` (0: store
  // clock), atomically. A denial writes nothing.
  absl::StatusOr<Decision> check(const AnyStrategy& strategy,
                                 std::string_view key, int64_t now_ms,
                                 double cost = 1) {
    if (!valid_step(key, now_ms, cost)) [[unlikely]] {
      return invalid_step(key, now_ms, cost);
    }
    return wait_for<Decision>([&](VerbCompletion<Decision>&& done) {
      do_check(strategy, key, now_ms, cost, std::move(done));
    });
  }

  // As `check`, without waiting for the store: `on_done` runs exactly once
  // with what `check` would return (core/completion.h), inline for invalid
  // arguments and for a backend whose step needs no I/O. The strategy and
  // key are copied before this returns.
  void check_async(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost, DecisionCompletion on_done) {
    if (!valid_step(key, now_ms, cost)) [[unlikely]] {
      std::move(on_done)(invalid_step(key, now_ms, cost));
      return;
    }
    do_check(strategy, key, now_ms, cost,
             VerbCompletion<Decision>::borrowed(on_done));
  }

  // The decision a cost-1 request would get, without writing anything (not
  // even a TTL).
  absl::StatusOr<Decision> peek(const AnyStrategy& strategy,
                                std::string_view key, int64_t now_ms) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return wait_for<Decision>([&](VerbCompletion<Decision>&& done) {
      do_peek(strategy, key, now_ms, std::move(done));
    });
  }

  // What `key` could spend at `now_ms` (0: store clock) for requests of
  // `cost`, computed by the C++ strategy from the key's state as the store
  // holds it (so it agrees with the store's decisions). Writes nothing.
  absl::StatusOr<Forecast> forecast(const AnyStrategy& strategy,
                                    std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    if (!valid_step(key, now_ms, cost)) [[unlikely]] {
      return invalid_step(key, now_ms, cost);
    }
    return wait_for<Forecast>([&](VerbCompletion<Forecast>&& done) {
      do_forecast(strategy, key, now_ms, cost, std::move(done));
    });
  }

  // Forgets `key`: its next check sees a cold key.
  absl::Status reset(const AnyStrategy& strategy, std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return wait_for<Acknowledged>([&](VerbCompletion<Acknowledged>&& done) {
             do_reset(strategy, key, std::move(done));
           })
        .status();
  }

  // Takes min(want, credits left) from the current window of `budget` on
  // `key`, the window read on the store's clock. `want` in [1, 2^53-1].
  absl::StatusOr<LeaseGrant> lease(const LeaseBudget& budget,
                                   std::string_view key, int64_t want) {
    if (absl::Status s = validate_lease(key, want); !s.ok()) return s;
    return wait_for<LeaseGrant>([&](VerbCompletion<LeaseGrant>&& done) {
      do_lease(budget, key, want, std::move(done));
    });
  }

  // As `lease`, without waiting for the store: `on_done` runs exactly once
  // with what `lease` would return (core/completion.h), inline for invalid
  // arguments and on a backend without a non-blocking lease (memory). The
  // budget and key are copied before this returns.
  void lease_async(const LeaseBudget& budget, std::string_view key,
                   int64_t want, Completion<LeaseGrant> on_done) {
    if (absl::Status s = validate_lease(key, want); !s.ok()) [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_lease(budget, key, want, VerbCompletion<LeaseGrant>::borrowed(on_done));
  }

  // Gives `credits` back to the window that started at `window_start_ms`
  // (from a `LeaseGrant`). Returns the credits restored: 0 if that window has
  // rolled (leftover is forfeited) or, for a non-empty `token`, if a
  // give-back with the same token already reached this window (so a retried
  // reconcile is applied once); never more than the window has handed out.
  // `credits` in [0, 2^53-1]; `token` at most kMaxLeaseTokenBytes.
  absl::StatusOr<int64_t> give_back(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t credits,
                                    std::string_view token = {}) {
    if (absl::Status s = validate_give_back(key, credits, token); !s.ok()) {
      return s;
    }
    return wait_for<int64_t>([&](VerbCompletion<int64_t>&& done) {
      do_give_back(budget, key, window_start_ms, credits, token,
                   std::move(done));
    });
  }

  // As `give_back`, without waiting for the store (as `lease_async`). The
  // budget, key and token are copied before this returns.
  void give_back_async(const LeaseBudget& budget, std::string_view key,
                       int64_t window_start_ms, int64_t credits,
                       std::string_view token, Completion<int64_t> on_done) {
    if (absl::Status s = validate_give_back(key, credits, token); !s.ok())
        [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_give_back(budget, key, window_start_ms, credits, token,
                 VerbCompletion<int64_t>(std::move(on_done)));
  }

  // Federation's lease (federation_core.h): takes min(want, credits left)
  // from the current window of `budget` on `key` and returns the grant with
  // its window's start and end, the window read on the store's clock
  // (`now_ms` 0, the default; a caller time in [1, 2^53-1] is for
  // conformance tests and replays). `want` in [1, 2^53-1]. A key holding
  // other state is kFailedPrecondition.
  absl::StatusOr<LeaseGrant> lease_windowed(const LeaseBudget& budget,
                                            std::string_view key, int64_t want,
                                            int64_t now_ms = 0) {
    if (absl::Status s = validate_want("lease_windowed", key, want, now_ms);
        !s.ok()) {
      return s;
    }
    return wait_for<LeaseGrant>([&](VerbCompletion<LeaseGrant>&& done) {
      do_lease_windowed(budget, key, want, now_ms, std::move(done));
    });
  }

  // As `lease_windowed`, without waiting for the store (as `lease_async`).
  // The budget and key are copied before this returns.
  void lease_windowed_async(const LeaseBudget& budget, std::string_view key,
                            int64_t want, int64_t now_ms,
                            Completion<LeaseGrant> on_done) {
    if (absl::Status s = validate_want("lease_windowed", key, want, now_ms);
        !s.ok()) [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_lease_windowed(budget, key, want, now_ms,
                      VerbCompletion<LeaseGrant>::borrowed(on_done));
  }

  // Gives `leftover` credits of the window that started at
  // `window_start_ms` (from a `lease_windowed` grant) back to `key`'s
  // budget, capped at `budget.limit()`. Returns the credits restored: 0 if
  // that window is not the current one (leftover of a rolled window is
  // forfeited), or if this (window, `token`) was reconciled before (so a
  // retry is applied once; "" is a token too). `leftover` in [0, 2^53-1];
  // `token` at most kMaxLeaseTokenBytes; `now_ms` as for `lease_windowed`.
  absl::StatusOr<int64_t> reconcile(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t leftover,
                                    std::string_view token = {},
                                    int64_t now_ms = 0) {
    if (absl::Status s = validate_reconcile(key, leftover, token, now_ms);
        !s.ok()) {
      return s;
    }
    return wait_for<int64_t>([&](VerbCompletion<int64_t>&& done) {
      do_reconcile(budget, key, window_start_ms, leftover, token, now_ms,
                   std::move(done));
    });
  }

  // As `reconcile`, without waiting for the store (as `lease_async`). The
  // budget, key and token are copied before this returns.
  void reconcile_async(const LeaseBudget& budget, std::string_view key,
                       int64_t window_start_ms, int64_t leftover,
                       std::string_view token, int64_t now_ms,
                       Completion<int64_t> on_done) {
    if (absl::Status s = validate_reconcile(key, leftover, token, now_ms);
        !s.ok()) [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_reconcile(budget, key, window_start_ms, leftover, token, now_ms,
                 VerbCompletion<int64_t>(std::move(on_done)));
  }

  // Regional escrow (escrow_core.h): takes min(want, balance) of `key`'s
  // live regional balance; the grant names the balance's window (granted 0
  // when none is live). `want` in [1, 2^53-1]; `now_ms` 0 (the store's
  // clock) or a caller time in [1, 2^53-1].
  absl::StatusOr<LeaseGrant> escrow_take(std::string_view key, int64_t want,
                                         int64_t now_ms = 0) {
    if (absl::Status s = validate_want("escrow_take", key, want, now_ms);
        !s.ok()) {
      return s;
    }
    return wait_for<LeaseGrant>([&](VerbCompletion<LeaseGrant>&& done) {
      do_escrow_take(key, want, now_ms, std::move(done));
    });
  }

  // As `escrow_take`, without waiting for the store (as `lease_async`). The
  // key is copied before this returns.
  void escrow_take_async(std::string_view key, int64_t want, int64_t now_ms,
                         Completion<LeaseGrant> on_done) {
    if (absl::Status s = validate_want("escrow_take", key, want, now_ms);
        !s.ok()) [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_escrow_take(key, want, now_ms,
                   VerbCompletion<LeaseGrant>::borrowed(on_done));
  }

  // Deposits `granted` credits of the coordinator window
  // [window_start_ms, expires_at_ms) into `key`'s regional balance (dropped
  // if that window is over or older than the balance's; replacing the
  // balance of an older window; else added). Returns the balance after.
  // `granted` in [0, 2^53-1]; window_start_ms < expires_at_ms, both in
  // [0, 2^53-1].
  absl::StatusOr<int64_t> escrow_refill(std::string_view key, int64_t granted,
                                        int64_t window_start_ms,
                                        int64_t expires_at_ms,
                                        int64_t now_ms = 0) {
    if (absl::Status s = validate_refill(key, granted, window_start_ms,
                                         expires_at_ms, now_ms);
        !s.ok()) {
      return s;
    }
    return wait_for<int64_t>([&](VerbCompletion<int64_t>&& done) {
      do_escrow_refill(key, granted, window_start_ms, expires_at_ms, now_ms,
                       std::move(done));
    });
  }

  // As `escrow_refill`, without waiting for the store (as `lease_async`).
  // The key is copied before this returns.
  void escrow_refill_async(std::string_view key, int64_t granted,
                           int64_t window_start_ms, int64_t expires_at_ms,
                           int64_t now_ms, Completion<int64_t> on_done) {
    if (absl::Status s = validate_refill(key, granted, window_start_ms,
                                         expires_at_ms, now_ms);
        !s.ok()) [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_escrow_refill(key, granted, window_start_ms, expires_at_ms, now_ms,
                     VerbCompletion<int64_t>(std::move(on_done)));
  }

  // Takes the whole live balance of `key` if it belongs to the window
  // starting at `window_start_ms`, and clears it: the first releaser gets
  // the credits, the next 0.
  absl::StatusOr<int64_t> escrow_release(std::string_view key,
                                         int64_t window_start_ms,
                                         int64_t now_ms = 0) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return wait_for<int64_t>([&](VerbCompletion<int64_t>&& done) {
      do_escrow_release(key, window_start_ms, now_ms, std::move(done));
    });
  }

  // The store's clock, epoch ms.
  absl::StatusOr<int64_t> now_ms() {
    return wait_for<int64_t>(
        [&](VerbCompletion<int64_t>&& done) { do_now_ms(std::move(done)); });
  }
  // As `now_ms`, without waiting: `on_done` runs once with what `now_ms`
  // would return (inline on a backend without an asynchronous path).
  void now_ms_async(Completion<int64_t> on_done) {
    do_now_ms(VerbCompletion<int64_t>(std::move(on_done)));
  }

  // One cheap round trip (Redis PING, Postgres SELECT 1): OK, or why the
  // store cannot be reached, within the backend's command deadline.
  absl::Status ping() {
    return wait_for<Acknowledged>([&](VerbCompletion<Acknowledged>&& done) {
             do_ping(std::move(done));
           })
        .status();
  }
  bool is_healthy() { return ping().ok(); }

  // Waits until the store is ready for calls, its connections open and set
  // up (scripts, schema, prepared statements), or until `deadline`: OK when
  // ready, else why not (the last connection error, kUnavailable, or
  // kDeadlineExceeded while still connecting). Network stores open their
  // connections in the background from `create` and after every failure,
  // so no call pays for one (a call waits at most its own deadline for a
  // ready connection); a service calls this once at start-up, a health
  // check with a deadline already past (no wait). A store with nothing to
  // open is always ready. Thread-safe.
  absl::Status wait_ready(absl::Time deadline) {
    return do_wait_ready(deadline);
  }

  // One distributed-concurrency step (heartbeat_core.h) for `report` over
  // `key`'s node table, atomically: returns the node's grant. `now_ms` 0
  // (the default, and what a fleet uses) reads the store's clock; a caller
  // time, in [1, 2^53-1], is for conformance tests and replays. Bad
  // reports or options are kInvalidArgument before any I/O; a key holding
  // other state is kFailedPrecondition. The table expires with its last
  // node's lease (plus the backend's `ttl_slack_ms`): a beat after that
  // starts a fresh table, the same on every backend.
  absl::StatusOr<HeartbeatGrant> heartbeat(std::string_view key,
                                           const HeartbeatReport& report,
                                           const HeartbeatOptions& options,
                                           int64_t now_ms = 0) {
    if (absl::Status s = validate_beat(key, report, options, now_ms); !s.ok()) {
      return s;
    }
    return wait_for<HeartbeatGrant>([&](VerbCompletion<HeartbeatGrant>&& done) {
      do_heartbeat(key, report, options, now_ms, std::move(done));
    });
  }

  // As `heartbeat`, without waiting for the store (as `lease_async`). The
  // key, report and options are copied before this returns.
  void heartbeat_async(std::string_view key, const HeartbeatReport& report,
                       const HeartbeatOptions& options, int64_t now_ms,
                       Completion<HeartbeatGrant> on_done) {
    if (absl::Status s = validate_beat(key, report, options, now_ms); !s.ok())
        [[unlikely]] {
      std::move(on_done)(std::move(s));
      return;
    }
    do_heartbeat(key, report, options, now_ms,
                 VerbCompletion<HeartbeatGrant>::borrowed(on_done));
  }

  // `key`'s node table as stored, sorted by id (empty for a cold key),
  // including peers whose lease lapsed but that no beat has evicted yet (a
  // table whose every lease lapsed may read as it was until the next beat
  // replaces it or the store collects it). Writes nothing. For operators,
  // tests and metrics.
  absl::StatusOr<std::vector<HeartbeatNode>> heartbeat_nodes(
      std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    using Nodes = std::vector<HeartbeatNode>;
    return wait_for<Nodes>([&](VerbCompletion<Nodes>&& done) {
      do_heartbeat_nodes(key, std::move(done));
    });
  }

  // "memory", "redis" or "postgres".
  virtual std::string_view backend() const noexcept = 0;

  // Backends implement one hook per verb, asynchronous: it completes
  // `done` exactly once, with what the verb answers, under the contract of
  // core/completion.h (within the command deadline, never under a lock of
  // the library, inline when no I/O is needed). The arguments are valid
  // when a hook is called (the verbs above checked them). The blocking
  // verb is the hook waited on (`wait_for`): `done.caller_waits()` tells a
  // backend with an I/O thread that it may run the call on the calling
  // thread instead (verb_completion.h). The verbs with no asynchronous
  // form (`peek`, `forecast`, `reset`, `escrow_release`, `ping`,
  // `heartbeat_nodes`) only ever reach their hook waited for. `done` comes
  // by rvalue reference: a hook completes it, or moves it on (into a
  // queue, to another coordinator's hook or `*_async` verb) before it
  // returns; handing it along costs no move.
 protected:
  virtual void do_check(const AnyStrategy& strategy, std::string_view key,
                        int64_t now_ms, double cost,
                        VerbCompletion<Decision>&& done) = 0;
  virtual void do_peek(const AnyStrategy& strategy, std::string_view key,
                       int64_t now_ms, VerbCompletion<Decision>&& done) = 0;
  virtual void do_forecast(const AnyStrategy& strategy, std::string_view key,
                           int64_t now_ms, double cost,
                           VerbCompletion<Forecast>&& done) = 0;
  virtual void do_reset(const AnyStrategy& strategy, std::string_view key,
                        VerbCompletion<Acknowledged>&& done) = 0;
  virtual void do_lease(const LeaseBudget& budget, std::string_view key,
                        int64_t want, VerbCompletion<LeaseGrant>&& done) = 0;
  virtual void do_give_back(const LeaseBudget& budget, std::string_view key,
                            int64_t window_start_ms, int64_t credits,
                            std::string_view token,
                            VerbCompletion<int64_t>&& done) = 0;
  virtual void do_now_ms(VerbCompletion<int64_t>&& done) = 0;
  // The hooks below have a default: a backend without the verb's path (a
  // Coordinator written outside this library) answers kUnimplemented
  // naming itself and the verb; `ping` reads the store's clock.
  virtual void do_lease_windowed(const LeaseBudget& /*budget*/,
                                 std::string_view /*key*/, int64_t /*want*/,
                                 int64_t /*now_ms*/,
                                 VerbCompletion<LeaseGrant>&& done) {
    std::move(done)(unimplemented("lease_windowed"));
  }
  virtual void do_reconcile(const LeaseBudget& /*budget*/,
                            std::string_view /*key*/,
                            int64_t /*window_start_ms*/, int64_t /*leftover*/,
                            std::string_view /*token*/, int64_t /*now_ms*/,
                            VerbCompletion<int64_t>&& done) {
    std::move(done)(unimplemented("reconcile"));
  }
  virtual void do_escrow_take(std::string_view /*key*/, int64_t /*want*/,
                              int64_t /*now_ms*/,
                              VerbCompletion<LeaseGrant>&& done) {
    std::move(done)(unimplemented("escrow_take"));
  }
  virtual void do_escrow_refill(std::string_view /*key*/, int64_t /*granted*/,
                                int64_t /*window_start_ms*/,
                                int64_t /*expires_at_ms*/, int64_t /*now_ms*/,
                                VerbCompletion<int64_t>&& done) {
    std::move(done)(unimplemented("escrow_refill"));
  }
  virtual void do_escrow_release(std::string_view /*key*/,
                                 int64_t /*window_start_ms*/,
                                 int64_t /*now_ms*/,
                                 VerbCompletion<int64_t>&& done) {
    std::move(done)(unimplemented("escrow_release"));
  }
  virtual void do_ping(VerbCompletion<Acknowledged>&& done) {
    do_now_ms(std::move(done).template then<int64_t>(
        [](absl::StatusOr<int64_t> now) -> absl::StatusOr<Acknowledged> {
          if (!now.ok()) return now.status();
          return Acknowledged{};
        }));
  }
  virtual void do_heartbeat(std::string_view /*key*/,
                            const HeartbeatReport& /*report*/,
                            const HeartbeatOptions& /*options*/,
                            int64_t /*now_ms*/,
                            VerbCompletion<HeartbeatGrant>&& done) {
    std::move(done)(unimplemented("heartbeat"));
  }
  virtual void do_heartbeat_nodes(
      std::string_view /*key*/,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) {
    std::move(done)(unimplemented("heartbeat_nodes"));
  }
  // Not a verb but a wait (`wait_ready`): nothing to open, always ready.
  virtual absl::Status do_wait_ready(absl::Time /*deadline*/) {
    return absl::OkStatus();
  }

  // The blocking form of a verb: runs `start` with a completion its caller
  // waits for, and returns what it completes with (at once when it ran
  // inline: no lock, no allocation; core/completion_latch.h).
  template <class T, class Start>
  static absl::StatusOr<T> wait_for(Start&& start) {
    // Returned in place. It holds a `T{}` until the hook completes: absl's
    // default (a status) is built out of line.
    absl::StatusOr<T> result(absl::in_place);
    CompletionLatch<T> latch(result);
    start(VerbCompletion<T>::waited(latch));
    latch.await();
    return result;
  }

 private:
  static absl::Status validate_lease(std::string_view key, int64_t want) {
    return validate_want("lease", key, want, 0);
  }
  static absl::Status validate_give_back(std::string_view key, int64_t credits,
                                         std::string_view token) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (credits < 0 || credits > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "give_back: credits must be in [0, 2^53-1]; got ", credits));
    }
    if (token.size() > kMaxLeaseTokenBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("give_back: token is ", token.size(),
                       " bytes; the maximum is ", kMaxLeaseTokenBytes));
    }
    return absl::OkStatus();
  }
  // A verb taking `want` credits (`verb` names it in the error).
  static absl::Status validate_want(std::string_view verb, std::string_view key,
                                    int64_t want, int64_t now_ms) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (want < 1 || want > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::string_view(verb.data(), verb.size()),
                       ": want must be in [1, 2^53-1]; got ", want));
    }
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return absl::OkStatus();
  }
  static absl::Status validate_reconcile(std::string_view key, int64_t leftover,
                                         std::string_view token,
                                         int64_t now_ms) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (leftover < 0 || leftover > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reconcile: leftover must be in [0, 2^53-1]; got ", leftover));
    }
    if (token.size() > kMaxLeaseTokenBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("reconcile: token is ", token.size(),
                       " bytes; the maximum is ", kMaxLeaseTokenBytes));
    }
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return absl::OkStatus();
  }
  static absl::Status validate_refill(std::string_view key, int64_t granted,
                                      int64_t window_start_ms,
                                      int64_t expires_at_ms, int64_t now_ms) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (granted < 0 || granted > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "escrow_refill: granted must be in [0, 2^53-1]; got ", granted));
    }
    if (window_start_ms < 0 || expires_at_ms > kMaxSafeInteger ||
        window_start_ms >= expires_at_ms) {
      return absl::InvalidArgumentError(absl::StrCat(
          "escrow_refill: the window must satisfy 0 <= start < end <= "
          "2^53-1; got [",
          window_start_ms, ", ", expires_at_ms, ")"));
    }
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return absl::OkStatus();
  }
  static absl::Status validate_beat(std::string_view key,
                                    const HeartbeatReport& report,
                                    const HeartbeatOptions& options,
                                    int64_t now_ms) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (absl::Status s = validate_heartbeat(report, options); !s.ok()) {
      return s;
    }
    if (!valid_now(now_ms)) return invalid_now(now_ms);
    return absl::OkStatus();
  }
  static constexpr bool valid_now(int64_t now_ms) noexcept {
    return now_ms >= 0 && now_ms <= kMaxSafeInteger;
  }
  static constexpr bool valid_step(std::string_view key, int64_t now_ms,
                                   double cost) noexcept {
    return is_valid_key(key) && is_valid_cost(cost) && valid_now(now_ms);
  }
  // The first problem of an invalid (key, now, cost).
  [[gnu::cold]] static absl::Status invalid_step(std::string_view key,
                                                 int64_t now_ms, double cost) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    return invalid_now(now_ms);
  }
  [[gnu::cold]] absl::Status unimplemented(std::string_view verb) const {
    return absl::UnimplementedError(
        absl::StrCat(absl::string_view(backend().data(), backend().size()),
                     ": ", absl::string_view(verb.data(), verb.size()),
                     " is not supported by this backend"));
  }
  [[gnu::cold]] static absl::Status invalid_now(int64_t now_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "now_ms must be 0 (store clock) or in [1, 2^53-1]; got ", now_ms));
  }
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_COORDINATOR_H_
