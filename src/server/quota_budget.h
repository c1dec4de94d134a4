// src/server/quota_budget.h
//
// Provides `QuotaBudget`: the allocation core of the quota door
// (docs/rlqs.md, "The design of QuotaBudget"). One global budget of R tokens
// per fill interval of F seconds, held on one server, split among the
// clients (RLQS streams) that report its bucket(s), as the token buckets
// Envoy's rate_limit_quota filter enforces. Pure: no clock, no I/O; the
// caller passes the time.
//
//     QuotaBudget b = *QuotaBudget::create({.fill_interval_s = 1, .ttl_s = 6});
//     (void)b.report("stream-1", /*allowed=*/40, /*denied=*/0,
//                    /*elapsed_ms=*/5000, now);
//     for (const QuotaSend& s : *b.assign(/*share=*/100, now)) { ... }
//     // ... and assign again after the next reports, or at next_due_ms().
//
// Design:
//
// - Demand. A client's report (allowed, denied over elapsed_ms) makes its
//   demand, in tokens per F:
//       demand = max(1, ceil((allowed + denied) * F_ms / max(elapsed_ms,
//                1000) * 5/4)),
//   its offered rate with a quarter of headroom to grow into. Never below 1:
//   an active client always wants a token per fill, so it can reveal demand,
//   and an idle client is not starved to DENY_ALL when there is room.
//   elapsed_ms is floored at a second because Envoy sends whole seconds and
//   0 in a bucket's first report.
// - Targets. targets = water_fill(share, demands) over the clients not
//   forgotten (core/water_filling.h): max-min fair, work-conserving.
// - Commitments. Clients do not acknowledge, and a response can be delayed
//   (by at most the delivery slack, an assumption: 1 s by default), lost
//   (a stream break) or overtaken, so every assignment sent to client c is
//   recorded as (tokens T, expires_at = sent_ms + ttl_ms + slack_ms): c may
//   hold it until then. c's commitment is
//       committed_c(now) = max T over c's unexpired records,
//   so a LOWERED assignment counts at its old value until the old one has
//   expired. Records are kept compact: one dominated by a newer one (T' >=
//   T, later expiry) is dropped, and so is an expired one; what remains,
//   by expiry, has T strictly falling, and its front is committed_c.
// - Assigning. For each client: a target below what it holds is sent now
//   (lowering; its old record still counts). A target above it is a raise to
//       g = min(target, share - sum over others o of committed_o(now)),
//   never negative, sent if g is above what it holds (raises go to the
//   clients holding least first; a client holding nothing is sent g even
//   when g is 0, as DENY_ALL). So
//       INVARIANT: sum_c committed_c(now) <= share
//   after every call and at every instant until the next (records only
//   expire in between), as long as share does not fall. When share falls,
//   only lowering happens and raises wait: the excess drains as the old
//   records expire, within ttl + slack. A raise short of its target is
//   "capped": the client is due again when another record expires
//   (next_due_ms). An unchanged assignment is re-sent once half its TTL has
//   passed: a refresh extending it (Envoy keeps the running bucket when the
//   token bucket is identical).
// - Fresh buckets. Envoy's first token bucket, and one after a DENY_ALL or
//   an expiry, starts full; a replaced one keeps the old one's fill ratio.
//   So when a client that held a token bucket is sent DENY_ALL, or its
//   assignment may have lapsed (not refreshed within ttl - slack, so a
//   refresh could arrive after it expired), its records are retired: they go on
//   counting, as a forgotten client's do, until they expire, and the client
//   starts again from nothing, so the full bucket it gets next is paid as new
//   budget. That keeps the fleet bound (docs/rlqs.md, "The bound"): admissions
//   in any interval I are at most R*I/F + R + R*(floor(I/(ttl + slack)) + 1).
// - The wire. An assignment is a token bucket {max_tokens = T,
//   tokens_per_fill = T, fill_interval = F} with its TTL in whole seconds,
//   or DENY_ALL when T is 0. tokens_per_fill is always set (Envoy reads an
//   unset one as 0) and F never changes for a budget (Envoy compares only
//   fill_interval's nanos when it decides whether a bucket changed).
//
// The caller calls `assign` (or, while its share is fenced, `hold`) after
// each report (or batch of reports), and again at `next_due_ms()`; a refresh
// due at ttl/2 but not sent by ttl - slack lets the client's assignment lapse
// (the bound still holds; the client waits for budget as a new one would).
//
// Thread-safety: none. A QuotaBudget is single-threaded state; its owner
// serializes every call (for instance under one mutex per budget).

#ifndef THROTTLEKIT_SRC_SERVER_QUOTA_BUDGET_H_
#define THROTTLEKIT_SRC_SERVER_QUOTA_BUDGET_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace throttlekit::server {

struct QuotaBudgetOptions {
  // F: the token buckets' fill interval, whole seconds in [1, 86400]; the
  // same in every assignment of this budget.
  int64_t fill_interval_s = 1;
  // The assignments' time to live, whole seconds in [1, 3600]; refreshed
  // every ttl/2.
  int64_t ttl_s = 6;
  // The assumed bound on a response's delivery delay, ms in [0, ttl/2]
  // (a refresh sent at ttl/2 must arrive before the assignment it extends
  // runs out).
  int64_t delivery_slack_ms = 1000;
};

// What one client is told about its bucket.
struct QuotaAssignment {
  // 0: DENY_ALL. Otherwise the token bucket {max_tokens = tokens,
  // tokens_per_fill = tokens, fill_interval = fill_interval_s}.
  int64_t tokens = 0;
  int64_t fill_interval_s = 1;
  // The assignment's time to live, whole seconds.
  int64_t ttl_s = 6;

  bool deny_all() const { return tokens == 0; }
  friend bool operator==(const QuotaAssignment&,
                         const QuotaAssignment&) = default;
};

// An assignment to send now, and to whom.
struct QuotaSend {
  std::string client_id;
  QuotaAssignment assignment;
};

// One client as the budget sees it (for tests and metrics).
struct QuotaClientView {
  // Reporting: not forgotten. A forgotten client is kept only while its
  // records count.
  bool active = false;
  int64_t demand = 0;  // tokens per fill interval, from its last report
  int64_t target = 0;  // its water-filling share at the last assign
  // The tokens of the last assignment sent (0: DENY_ALL) while a refresh
  // is still in time (sent at most ttl - slack ago); nullopt: none.
  std::optional<int64_t> holding;
  int64_t last_sent_ms = 0;  // when that was sent
  int64_t committed = 0;     // committed_c(now)
  bool capped = false;       // its last raise fell short of its target
};

class QuotaBudget {
 public:
  // kInvalidArgument naming the option out of range.
  static absl::StatusOr<QuotaBudget> create(const QuotaBudgetOptions& options);

  // The demand formula (see the class comment): tokens per fill interval
  // of `fill_interval_s` seconds for `allowed + denied` requests over
  // `elapsed_ms`; at least 1, at most 2^53-1. Inputs as `report` checks
  // them.
  static int64_t demand_per_fill(int64_t allowed, int64_t denied,
                                 int64_t elapsed_ms, int64_t fill_interval_s);

  // Records the report of `client_id` (a new client joins; a forgotten one
  // comes back): its demand from `allowed` and `denied` requests (each in
  // [0, 2^40]) over `elapsed_ms` (in [0, 1 day]). kInvalidArgument naming
  // the field, changing nothing, for a value out of range or an empty id.
  // Makes the budget due at `now_ms`.
  absl::Status report(std::string_view client_id, int64_t allowed,
                      int64_t denied, int64_t elapsed_ms, int64_t now_ms);

  // The client's stream closed: its demand leaves the split at the next
  // assign, but what was sent to it goes on counting until it expires (the
  // client keeps an assignment until its TTL, even after a stream break).
  // An unknown id is a no-op. Makes the budget due at `now_ms`.
  void forget(std::string_view client_id, int64_t now_ms);

  // The client's bucket was abandoned: the client erases it, and the
  // bucket it makes at its next request starts without an assignment. So
  // the client is forgotten and its records are retired (they go on
  // counting until they expire, as DENY_ALL's do): if it reports again,
  // it starts from nothing and any token bucket it is sent (which Envoy
  // starts full) is paid from free budget. An unknown id is a no-op.
  // Makes the budget due at `now_ms`.
  void abandon(std::string_view client_id, int64_t now_ms);

  // Splits `share` (tokens per fill interval, [0, 2^32-1]: this server's
  // part of the global budget) among the clients and returns the
  // assignments to send now, in client id order (see the class comment).
  // kInvalidArgument for a share out of range, changing nothing.
  absl::StatusOr<std::vector<QuotaSend>> assign(int64_t share, int64_t now_ms);

  // The server may not commit anything now (its fleet share is fenced,
  // heartbeat_share.h: an assignment sent now could outlive what the
  // fleet reserves for it): every assignment in force is kept, nothing is
  // raised or refreshed, and each active client whose refresh is due (or
  // that holds nothing, or whose assignment may have lapsed) is sent
  // DENY_ALL, which commits nothing. So a short fence costs the clients
  // nothing while their assignments hold, a long one lowers each to
  // DENY_ALL by half a TTL after its last assignment. Returns the
  // assignments to send now, in client id order.
  std::vector<QuotaSend> hold(int64_t now_ms);

  // When `assign` should next run though no report came: the earliest
  // refresh (half a TTL after a client's last assignment), the earliest
  // expiry that frees budget for a capped raise, the time of a report or
  // forget since the last assign, or, when no client reports, the expiry
  // of the last record (then `idle`). INT64_MAX when nothing is due.
  int64_t next_due_ms() const { return next_due_ms_; }

  // sum_c committed_c(now_ms), forgotten clients and retired records
  // included.
  int64_t committed(int64_t now_ms) const;
  // No client reports it and nothing it sent still counts at `now_ms`:
  // the budget can be dropped (a new one would start from the same state).
  bool idle(int64_t now_ms) const;
  // The sum of the active clients' demands (tokens per fill interval, as
  // their last reports gave them), at most 2^53-1: what this budget asks of
  // a fleet.
  int64_t demand() const;
  // committed_c(now_ms) of one client (its retired records excluded); 0 for
  // an unknown id.
  int64_t committed(std::string_view client_id, int64_t now_ms) const;

  // One client's view at `now_ms`; nullopt for an unknown id.
  std::optional<QuotaClientView> client(std::string_view client_id,
                                        int64_t now_ms) const;
  // The clients tracked: the active ones and the forgotten ones whose
  // records still count.
  size_t client_count() const { return clients_.size(); }

  const QuotaBudgetOptions& options() const { return options_; }

 private:
  // One assignment sent: `tokens` committed until `expires_ms`.
  struct Record {
    int64_t tokens = 0;
    int64_t expires_ms = 0;
  };
  // A client's records, by expiry, tokens strictly falling: the front is
  // the commitment.
  struct Records {
    std::vector<Record> list;
    int64_t at(int64_t now_ms) const;
    void add(Record r);
    void drop_expired(int64_t now_ms);
  };
  struct Sent {
    int64_t tokens = 0;
    int64_t sent_ms = 0;
  };
  struct Client {
    bool active = true;
    int64_t demand = 1;
    int64_t target = 0;
    Records records;
    std::optional<Sent> last;  // the last assignment sent, if in force
    bool capped = false;
  };

  explicit QuotaBudget(const QuotaBudgetOptions& options) : options_(options) {}

  int64_t ttl_ms() const { return options_.ttl_s * 1000; }
  // Whether a refresh of `last` sent at `now_ms` could arrive after the
  // client's copy expired (sent more than ttl - slack after it), or its
  // record has expired (at ttl + slack; this adds the instant now == sent +
  // ttl when the slack is 0, where a refresh would re-commit, unchecked,
  // what a raise in the same assign already handed on: docs/formal_model.md,
  // "A finding at slack 0").
  bool lapsed(const Sent& last, int64_t now_ms) const {
    return now_ms > last.sent_ms + ttl_ms() - options_.delivery_slack_ms ||
           now_ms >= last.sent_ms + ttl_ms() + options_.delivery_slack_ms;
  }
  // Moves `c`'s records to the retired ones: they go on counting, and `c`
  // starts from nothing.
  void retire(Client& c);
  // Drops what has expired at `now_ms` (a forgotten client with its last
  // record) and retires each client whose assignment may have lapsed.
  void expire(int64_t now_ms);
  // Sets next_due_ms_ from the clients' refreshes, capped raises and, with
  // nobody active, the last record's expiry.
  void schedule();
  // The sends, in client id order.
  static std::vector<QuotaSend> in_id_order(
      std::vector<std::pair<const std::string*, QuotaSend>> out);
  // Records and returns the assignment of `tokens` to `id`.
  QuotaSend send(const std::string& id, Client& c, int64_t tokens,
                 int64_t now_ms);

  QuotaBudgetOptions options_;
  std::map<std::string, Client, std::less<>> clients_;
  // Records of clients retired by a DENY_ALL or a lapse, one entry per
  // retirement (each counts as a forgotten client's would).
  std::vector<Records> retired_;
  int64_t next_due_ms_ = std::numeric_limits<int64_t>::max();
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_QUOTA_BUDGET_H_
