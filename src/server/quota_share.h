// src/server/quota_share.h (internal)
//
// Provides `ShareSource`: where the quota door (quota_door.h) gets this
// server's share of each budget's global limit, and `FixedShare`, the
// source of a server alone (the rule's whole limit). A fleet's source is
// `HeartbeatShare` (heartbeat_share.h).
//
// The door tells its source of every budget it creates (`track`, with a
// `QuotaBudgetRef`) and reads the share through the `BudgetShare` it gets
// back at each assignment, under the budget's lock. A source may read the
// budget's usage (`QuotaBudgetRef::usage`) and tell the door the share may
// have moved (`QuotaBudgetRef::changed`).
//
// Contract of a source, which the door's bound rests on (docs/rlqs.md,
// "The fleet"): the shares the servers of a budget use at any instant,
// plus what each server committed earlier under a higher share and has not
// yet seen expire, sum to at most the budget's limit.
//
// Thread-safety: every method of a source and of a BudgetShare is safe to
// call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_QUOTA_SHARE_H_
#define THROTTLEKIT_SRC_SERVER_QUOTA_SHARE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rlqs_config.h"

namespace throttlekit::server {

// A budget's state a source may report to the fleet.
struct QuotaUsage {
  // sum over its clients of committed_c(now), retired records included
  // (QuotaBudget::committed).
  int64_t committed = 0;
  // sum over its reporting clients of their demand, tokens per fill
  // interval (QuotaBudget::demand).
  int64_t demand = 0;
  // The rule's `requests` in force (a reload may change it).
  int64_t limit = 0;
};

// One budget of the door, as its source sees it.
struct QuotaBudgetRef {
  std::string domain;
  // The budget within the domain (RlqsRuleMatch::budget_key).
  std::string budget_key;
  // The rule's limit when the budget was made; a reload may change its
  // `requests` (QuotaUsage::limit, BudgetShare::at), never its interval.
  RlqsLimit limit;
  // How long an assignment counts after it is sent: its TTL plus the
  // delivery slack, ms (QuotaBudgetOptions).
  int64_t commit_ms = 0;
  // The budget's usage at `now_ms`; nullopt once the door dropped the
  // budget. Takes the budget's lock, so never called under it.
  std::function<std::optional<QuotaUsage>(int64_t now_ms)> usage;
  // Tells the door the share may have moved: it assigns the budget again
  // soon. Never blocks (a store's completion thread may call it).
  std::function<void()> changed;
};

// One budget's share on this server.
class BudgetShare {
 public:
  virtual ~BudgetShare() = default;
  // Tokens per fill interval this server may commit at `now_ms` when the
  // rule's `requests` in force are `limit` (at most `limit`); nullopt
  // while it is not known yet (the door then assigns nothing: the clients
  // apply their no-assignment behaviour). Called under the budget's lock:
  // never blocks and never calls the door.
  virtual std::optional<int64_t> at(int64_t now_ms, int64_t limit) = 0;
  // Whether the share is fenced at `now_ms`: `at` reads 0 though the share
  // granted is higher, because nothing committed now would expire within
  // what the fleet reserves for this server. The door then holds its
  // clients (QuotaBudget::hold) instead of lowering them all at once. Under
  // the budget's lock, as `at`; a share that never fences says false.
  virtual bool fenced(int64_t now_ms) {
    (void)now_ms;
    return false;
  }
};

class ShareSource {
 public:
  virtual ~ShareSource() = default;
  // A budget the door created; called once per budget, under no budget's
  // lock.
  virtual std::shared_ptr<BudgetShare> track(QuotaBudgetRef budget) = 0;
  // Stops whatever the source runs in the background: no `usage` or
  // `changed` call starts after it returns. Idempotent; the door calls it
  // when it stops.
  virtual void stop() {}
  // Appends the source's Prometheus families (docs/rlqs.md, "Metrics");
  // none for a source alone.
  virtual void append_prometheus(std::string& /*out*/) {}
};

// A server alone: every budget's share is its whole limit.
class FixedShare final : public ShareSource {
 public:
  std::shared_ptr<BudgetShare> track(QuotaBudgetRef) override {
    return std::make_shared<Whole>();
  }

 private:
  class Whole final : public BudgetShare {
   public:
    std::optional<int64_t> at(int64_t, int64_t limit) override { return limit; }
  };
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_QUOTA_SHARE_H_
