// src/server/quota_door.h (internal)
//
// Provides `QuotaDoor`: the state of throttlekit-server's rate limit quota
// service (docs/rlqs.md, "The stream service"). Each budget's share on this
// server comes from a `ShareSource` (quota_share.h): the rule's whole limit
// on a server alone, the store's heartbeat step in a fleet
// (heartbeat_share.h).
//
// - Streams. Each open stream (quota_stream.h) has a server-unique id. Its
//   first report fixes its domain; each bucket it reports subscribes it to
//   that bucket's assignments (Envoy ignores actions for buckets it has not
//   reported).
// - Reports. A report is validated whole before anything changes; then
//   each usage is matched to a rule of the domain (rlqs_config.h). A
//   bucket of an ALLOW_ALL or DENY_ALL rule, an unmatched one, or any
//   bucket of an unknown domain under `unknownDomain: allow` gets a blanket
//   rule with its TTL, re-sent every ttl/2. A bucket of a limited rule
//   feeds its budget: one `QuotaBudget` per (domain, budget key), created
//   on its first report from the rule's options, whose clients are
//   (stream, bucket id) pairs. Every usage is `report`ed first; then each
//   budget the message touched is assigned once, `assign(share)` with the
//   share its source gives now (none yet: nothing is assigned until the
//   source says the share moved), and every assignment returned is pushed
//   at once, to this stream and to the others (a lowered one lets a
//   client whose demand jumped be raised soon).
// - The pusher, one thread, wakes at the earliest `next_due_ms()` of any
//   budget, at a blanket refresh, when a stream closed (its `forget`
//   makes a budget due), or when a budget's share moved, and pushes what
//   `assign` returns. It finds what is due in two ordered queues, not by
//   scanning: budgets by due time (`due_`) and streams by their next
//   blanket refresh (`blanket_due_`). A budget's entry is never later
//   than its `next_due_ms()` (a report, an assign or a forget that makes
//   it earlier moves the entry; one that makes it later leaves it, and the
//   pusher, finding nothing due there, queues it again at its real time);
//   a budget waiting for a share is not queued until the share moves,
//   which queues it first. So a look costs O(log n) per budget or stream
//   due, whatever the number tracked.
// - Abandon. A bucket a stream reports with no requests for `abandonIdle`
//   gets an abandon action (the client erases it, and reports it afresh
//   at its next request): its blanket is no longer refreshed and its
//   budget client is abandoned (QuotaBudget::abandon: its records count
//   until they expire, and a returning bucket starts from nothing).
// - A budget no client reports whose records have all expired is dropped
//   by the pusher (a report finding it dropped takes a new one), and with
//   it its beats in a fleet.
// - A stream's end (half-close, cancel, error, shutdown) forgets its
//   clients in every budget they reported: their records count until they
//   expire.
// - The delivery slack of every budget (QuotaBudgetOptions) is
//   min(1 s, ttl/4), leaving the pusher at least ttl/4 between a refresh's
//   due time and the lapse of the assignment it extends.
//
// - Reload (`reload`, docs/rlqs.md "Reloading"). A new `rlqs:` block is
//   swapped in whole; a report reads the block in force when it starts.
//   A budget is named by its rule's identity (rlqs_rule_identity: the
//   match, `per`, the TTL, `shared`), not its place: a budget whose rule
//   keeps its identity is kept, records and all, and takes the rule's new
//   `requests` at once (its share falls or rises; a lowered one drains as
//   QuotaBudget lowers). Any other change reaches a bucket at its next
//   report: a bucket whose rule is gone, or now another, leaves its old
//   budget (forgotten there: its records count until they expire) for its
//   new budget or blanket; when its new budget's fill interval differs
//   from the old one's, it is sent DENY_ALL first, so that Envoy, which
//   compares only a fill interval's nanos, starts the new token bucket
//   afresh rather than keeping the old one's rate. A budget no rule names
//   any more is dropped once idle. `fleetHeartbeat` is kept from start (a
//   reload changing it is refused).
//
// Thread-safety: every method is safe to call concurrently. Lock order:
// the door's mutex, then one budget's, then a stream's (a leaf); a push
// (gRPC's StartWrite) never holds the door's or a budget's mutex.

#ifndef THROTTLEKIT_SRC_SERVER_QUOTA_DOOR_H_
#define THROTTLEKIT_SRC_SERVER_QUOTA_DOOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "quota_budget.h"
#include "quota_share.h"
#include "quota_stream.h"
#include "rlqs_config.h"
#include "server_clock.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

class QuotaDoor {
 public:
  // Serves `config` (no domains: every stream ends NOT_FOUND) on `clock`,
  // with each budget's share from `shares` (null: `FixedShare`).
  QuotaDoor(RlqsConfig config, ServerClock clock,
            std::unique_ptr<ShareSource> shares = nullptr);
  ~QuotaDoor();
  QuotaDoor(const QuotaDoor&) = delete;
  QuotaDoor& operator=(const QuotaDoor&) = delete;

  // A new stream writing through `writer`; null once stopped (the caller
  // finishes it UNAVAILABLE).
  std::shared_ptr<QuotaStream> open(QuotaStreamWriter* writer);
  // Handles one message of `stream`. A non-OK status is what the stream
  // is to end with (INVALID_ARGUMENT naming the field and the bucket's
  // index, NOT_FOUND for an unknown domain under `unknownDomain:
  // notFound`); nothing changed then.
  absl::Status report(QuotaStream& stream,
                      const rlqs_pb::RateLimitQuotaUsageReports& message);
  // The stream is done (the reactor's OnDone): its clients are forgotten.
  void close(QuotaStream& stream);
  // Finishes every stream UNAVAILABLE, refuses new ones, stops the pusher
  // and the share source. Idempotent; the server calls it before gRPC's
  // Shutdown.
  void stop();

  // Serves `next` from now on (above, "Reload"). kInvalidArgument naming
  // the field when `next` changes what a reload cannot
  // (`rlqs.fleetHeartbeat`), kUnavailable once stopped; nothing changed
  // then. Reloads are serialised.
  absl::Status reload(RlqsConfig next);
  // Whether `reload(next)` would be refused, and why; changes nothing.
  absl::Status check_reload(const RlqsConfig& next);
  // Counts a reload refused before it reached `reload` (the watcher's,
  // when check_reload refused the document).
  void count_reload_error() {
    reload_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  // The domains of the block in force.
  size_t domains();

  // The door's families of the Prometheus text (docs/rlqs.md, "Metrics").
  void append_prometheus(std::string& out);

  // For tests and metrics.
  size_t streams_open();
  size_t budgets();

 private:
  struct Counters {
    std::atomic<int64_t> allowed{0};
    std::atomic<int64_t> denied{0};
  };
  // Where a budget client's assignments go.
  struct Target {
    std::weak_ptr<QuotaStream> stream;
    rlqs_pb::BucketId bucket_id;
  };
  // The block in force and its counters, swapped whole by a reload.
  struct Served {
    RlqsConfig config;
    // Per domain, per rule and last the unmatched buckets, aligned with
    // `config`; a reload carries a rule's counters to the rule of the same
    // identity.
    std::vector<std::vector<std::shared_ptr<Counters>>> counters;
  };
  struct Budget {
    Budget(QuotaBudget b, std::string d, std::string k, std::string i,
           int64_t fill_s, int64_t requests)
        : domain(std::move(d)),
          key(std::move(k)),
          identity(std::move(i)),
          fill_interval_s(fill_s),
          budget(std::move(b)),
          limit(requests) {}
    const std::string domain;
    const std::string key;
    const std::string identity;  // its rule's
    const int64_t fill_interval_s;
    // Set before the budget is published; read under `mu`.
    std::shared_ptr<BudgetShare> share;
    // The source said the share moved: the pusher assigns it.
    std::atomic<bool> share_moved{false};
    Mutex mu;
    QuotaBudget budget ABSL_GUARDED_BY(mu);
    // The rule's `requests` in force (a reload may change it).
    int64_t limit ABSL_GUARDED_BY(mu);
    // No share known at the last assign: not due until the share moves.
    bool waiting ABSL_GUARDED_BY(mu) = false;
    // Idle and dropped from the door: a report that finds it takes a new
    // one.
    bool dropped ABSL_GUARDED_BY(mu) = false;
    std::map<std::string, Target> targets ABSL_GUARDED_BY(mu);
    // Its key in the door's `due_` (kNever: not queued). Guarded by the
    // door's `mu_` (not expressible as an annotation here).
    int64_t queued_ms = std::numeric_limits<int64_t>::max();
  };
  struct Open {
    std::shared_ptr<QuotaStream> stream;
    // The budget clients it reported: (budget, client id).
    std::map<std::string, std::shared_ptr<Budget>> clients;
    // Its key in `blanket_due_` (kNever: not queued).
    int64_t blanket_queued_ms = std::numeric_limits<int64_t>::max();
  };
  using Pushes =
      std::map<std::shared_ptr<QuotaStream>,
               std::vector<rlqs_pb::RateLimitQuotaResponse::BucketAction>>;

  // A new budget of `domain`'s rule `rule` (which has a limit) with
  // `requests`, tracked by the share source.
  absl::StatusOr<std::shared_ptr<Budget>> create_budget(
      const RlqsDomain& domain, const RlqsBucketRule& rule,
      const std::string& key, int64_t requests);
  // The budget of `match` in `domain` of `served` (created on first use),
  // with `client` of stream `stream_id` recorded as reporting it. Sets
  // `*left` to the budget the client reported before, if another.
  absl::StatusOr<std::shared_ptr<Budget>> budget_for(
      const Served& served, const RlqsDomain& domain,
      const RlqsRuleMatch& match, int64_t stream_id, const std::string& client,
      std::shared_ptr<Budget>* left);
  // The budget `client` of stream `stream_id` reported (null if none), no
  // longer its: the bucket now gets a blanket rule.
  std::shared_ptr<Budget> leave_budget(int64_t stream_id,
                                       const std::string& client);
  // `client` forgotten in `b` at `now_ms`; returns b's due time.
  static int64_t forget_in(Budget& b, const std::string& client,
                           int64_t now_ms);
  // The block in force.
  std::shared_ptr<const Served> served();
  // Forgets bucket `bucket_key` of `stream` (reported idle): no more
  // blanket refreshes, and its budget client is abandoned.
  void abandon(QuotaStream& stream, const std::string& bucket_key,
               int64_t now_ms);
  // Drops each of `idle` that is still idle from the door's budgets.
  void drop_idle(const std::vector<std::shared_ptr<Budget>>& idle);
  // Assigns `b` at `now_ms` (requires b.mu) and adds its sends to `out`.
  void assign_locked(Budget& b, int64_t now_ms, Pushes& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu);
  void push(Pushes& pushes);
  // When the pusher is to look at `b` (kNever: not until its share moves).
  static int64_t due_locked(Budget& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) {
    return b.waiting ? std::numeric_limits<int64_t>::max()
                     : b.budget.next_due_ms();
  }
  // Queues each of `budgets` at its `due_ms` and the open stream
  // `stream_id`'s blanket refresh at `blanket_due_ms` (kNever: nothing),
  // and wakes the pusher if any is due before it means to look.
  void queue(const std::vector<std::shared_ptr<Budget>>& budgets,
             const std::vector<int64_t>& due_ms, int64_t blanket_due_ms,
             int64_t stream_id);
  // Queues `b` for the pusher at `due_ms` unless it is already queued at
  // or before it (kNever: nothing to queue). Returns true if the pusher is
  // to be woken (it meant to look later); with `wake`, also sets wake_.
  bool queue_locked(const std::shared_ptr<Budget>& b, int64_t due_ms,
                    bool wake = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for the blanket refresh of the open stream `it`.
  bool queue_blankets_locked(std::map<int64_t, Open>::iterator it,
                             int64_t due_ms, bool wake = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void pusher_loop();
  // `next` served, with the counters of `was` (null: none) carried by rule
  // identity.
  static std::shared_ptr<const Served> make_served(RlqsConfig next,
                                                   const Served* was);

  const ServerClock clock_;
  const std::unique_ptr<ShareSource> shares_;
  // The block's fleetHeartbeat at start, which the share source runs at
  // (the default when the block had no domains).
  const int64_t fleet_heartbeat_ms_;

  Mutex reload_mu_;  // one reload at a time; before mu_
  Mutex mu_;
  std::shared_ptr<const Served> served_ ABSL_GUARDED_BY(mu_);
  std::condition_variable cv_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  // When the pusher next looks unless woken.
  int64_t pusher_due_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Open> streams_ ABSL_GUARDED_BY(mu_);
  // By domain name and budget key.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Budget>>
      budgets_ ABSL_GUARDED_BY(mu_);
  // The pusher's queues: budgets by the time it is to look at them (a
  // moved share: INT64_MIN), and open streams (by id) by their next
  // blanket refresh. One entry per budget or stream at most, at its
  // `queued_ms` / `blanket_queued_ms`.
  std::set<std::pair<int64_t, std::shared_ptr<Budget>>> due_
      ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, int64_t>> blanket_due_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> reports_{0};
  std::atomic<int64_t> bad_reports_{0};
  std::atomic<int64_t> assignments_{0};
  std::atomic<int64_t> abandoned_{0};
  std::atomic<int64_t> streams_total_{0};
  std::atomic<int64_t> reloads_{0};
  std::atomic<int64_t> reload_errors_{0};

  std::thread pusher_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_QUOTA_DOOR_H_
