// throttlekit/federation/internal/federation_source.h
//
// Provides `detail::FederationSource`: the `CreditSource` of a federated
// limiter (federated_limiter.h, docs/federation.md). A miss takes credits
// from the region's escrow (L2) first, else crosses to the global
// coordinator with ONE `lease_windowed` (of `escrow_batch` per batch when
// the region pools credits and the key has a pace in this window, the
// excess refilling the escrow; else of what the miss needs). Grants are
// window-coupled: the limiter spends them only before the coordinator's window
// end.
//
// Health: an outage of the global coordinator marks it unhealthy; until
// `health_check_ms` has passed no miss crosses to it (a miss then fails at
// once with kUnavailable, which the limiter's fail policy turns into a
// denial), and the first miss after that is the probe. While unhealthy,
// `kRegionalOnly` still serves the escrow; `kFailClosed` serves only the
// credits the process holds. An escrow that fails is skipped (the global
// coordinator still answers) and counted.
//
// Give-backs (close, idle) reconcile to the global coordinator, once per
// (window, token), the token prefixed by the region.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_FEDERATION_INTERNAL_FEDERATION_SOURCE_H_
#define THROTTLEKIT_FEDERATION_INTERNAL_FEDERATION_SOURCE_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/twotier/internal/credit_source.h"
#include "throttlekit/twotier/internal/give_back_tokens.h"

namespace throttlekit::detail {

class FederationSource final : public CreditSource {
 public:
  struct Config {
    LeaseBudget budget;
    std::string prefix;         // global keys: prefix:key
    std::string escrow_prefix;  // escrow keys: escrow_prefix:key
    std::string region;
    std::shared_ptr<Coordinator> global;
    std::shared_ptr<Coordinator> escrow;  // null: no L2
    int64_t batch = 1;                    // the limiter's batch
    int64_t escrow_batch = 0;             // >= batch
    bool regional_only = false;
    int64_t health_check_ms = 5000;
    std::function<int64_t()> now_ms;  // this process's clock
  };
  struct Counters {
    int64_t global_leases = 0;      // lease_windowed round trips
    int64_t global_credits = 0;     // credits they granted
    int64_t escrow_takes = 0;       // escrow round trips of a take
    int64_t escrow_credits = 0;     // credits taken from the escrow
    int64_t escrow_refills = 0;     // grants' excess put in the escrow
    int64_t escrow_errors = 0;      // escrow calls that failed (skipped)
    int64_t global_outages = 0;     // global calls that failed: outage
    int64_t fast_failures = 0;      // misses refused while unhealthy
    int64_t forfeited_credits = 0;  // escrow credits of an older window
    int64_t reconciled_credits = 0;
  };

  explicit FederationSource(Config c)
      : c_(std::move(c)), reset_strategy_(budget_strategy(c_.budget)) {}

  // The blocking take and the take without waiting are one chain of
  // steps (`begin`): waited for, each step calls the blocking verb and goes
  // on inline; without waiting, each issues the verb's asynchronous form
  // and goes on from its completion.
  absl::StatusOr<LeaseGrant> take(std::string_view key, int64_t want,
                                  bool paced) override {
    std::optional<absl::StatusOr<LeaseGrant>> out;
    begin(key, want, paced, /*wait=*/true,
          [&out](absl::StatusOr<LeaseGrant> g) { out = std::move(g); });
    return *std::move(out);
  }

  void take_async(std::string_view key, int64_t want, bool paced,
                  Completion<LeaseGrant> on_done) override {
    begin(key, want, paced, /*wait=*/false, std::move(on_done));
  }

  absl::StatusOr<int64_t> give_back(std::string_view key,
                                    int64_t window_start_ms, int64_t credits,
                                    std::string_view token) override {
    absl::StatusOr<int64_t> back =
        c_.global->reconcile(c_.budget, join_key(c_.prefix, key),
                             window_start_ms, credits, region_token(token));
    if (back.ok()) add(reconciled_credits_, *back);
    return back;
  }

  absl::Status reset(std::string_view key) override {
    if (c_.escrow != nullptr) {
      if (absl::Status s = c_.escrow->reset(reset_strategy_,
                                            join_key(c_.escrow_prefix, key));
          !s.ok()) {
        return s;
      }
    }
    return c_.global->reset(reset_strategy_, join_key(c_.prefix, key));
  }

  // Takes the region's escrow balance of `key` for the window starting at
  // `window_start_ms` and reconciles it to the global coordinator (the
  // first releaser of a window wins). Returns the credits restored.
  absl::StatusOr<int64_t> release_escrow(std::string_view key,
                                         int64_t window_start_ms) {
    if (c_.escrow == nullptr) return 0;
    absl::StatusOr<int64_t> out = c_.escrow->escrow_release(
        join_key(c_.escrow_prefix, key), window_start_ms);
    if (!out.ok() || *out == 0) return out;
    return give_back(key, window_start_ms, *out,
                     absl::StrCat("l2-release:", window_start_ms));
  }

  bool healthy() const noexcept {
    return healthy_.load(std::memory_order_acquire);
  }

  Counters counters() const noexcept {
    return Counters{get(global_leases_),     get(global_credits_),
                    get(escrow_takes_),      get(escrow_credits_),
                    get(escrow_refills_),    get(escrow_errors_),
                    get(global_outages_),    get(fast_failures_),
                    get(forfeited_credits_), get(reconciled_credits_)};
  }

 private:
  static void add(std::atomic<int64_t>& a, int64_t v) noexcept {
    a.fetch_add(v, std::memory_order_relaxed);
  }
  static int64_t get(const std::atomic<int64_t>& a) noexcept {
    return a.load(std::memory_order_relaxed);
  }

  std::string region_token(std::string_view token) const {
    return absl::StrCat(c_.region, ":",
                        absl::string_view(token.data(), token.size()));
  }

  // One take in progress, carried from step to step.
  struct Take {
    std::string key;
    int64_t want = 0;
    bool paced = false;
    bool wait = false;  // blocking verbs, inline; else asynchronous ones
    int64_t now = 0;
    bool try_global = false;
    LeaseGrant from_escrow{};
    int64_t escrow_left = 0;  // what the escrow holds after this take
    std::string global_key;
    LeaseGrant grant{};  // the answer, once the global lease is in
    int64_t excess = 0;  // the global grant beyond the need: parked
    Completion<LeaseGrant> done;
  };
  using TakePtr = std::unique_ptr<Take>;

  // The escrow (L2) first, when the region has one and may use it.
  void begin(std::string_view key, int64_t want, bool paced, bool wait,
             Completion<LeaseGrant> done) {
    auto t = std::make_unique<Take>();
    t->key = std::string(key);
    t->want = want;
    t->paced = paced;
    t->wait = wait;
    t->done = std::move(done);
    t->now = c_.now_ms();
    const bool healthy = healthy_.load(std::memory_order_acquire);
    t->try_global =
        healthy || t->now >= reprobe_at_.load(std::memory_order_acquire);
    if (c_.escrow == nullptr || !(healthy || c_.regional_only)) {
      after_escrow(std::move(t));
      return;
    }
    const std::string escrow_key = join_key(c_.escrow_prefix, key);
    if (wait) {
      on_escrow(std::move(t), c_.escrow->escrow_take(escrow_key, want));
      return;
    }
    c_.escrow->escrow_take_async(
        escrow_key, want, 0,
        [this, t = std::move(t)](absl::StatusOr<LeaseGrant> g) mutable {
          on_escrow(std::move(t), std::move(g));
        });
  }

  void on_escrow(TakePtr t, absl::StatusOr<LeaseGrant> taken) {
    if (taken.ok()) {
      add(escrow_takes_, 1);
      add(escrow_credits_, taken->granted);
      t->from_escrow = *taken;
    } else {
      add(escrow_errors_, 1);  // skipped: the global coordinator answers
    }
    after_escrow(std::move(t));
  }

  // Served by the escrow, refused while unhealthy, or on to the global
  // coordinator with one `lease_windowed`.
  void after_escrow(TakePtr t) {
    const int64_t got = t->from_escrow.granted;
    // A grant served by the escrow alone cannot say what the global window
    // holds, so it never reads as spent (window_remaining 0 tells the
    // limiter to stop asking).
    t->escrow_left = t->from_escrow.window_remaining;
    t->from_escrow.window_remaining = kMaxSafeInteger;
    if (got >= t->want) return finish(std::move(t), Served::kEscrow);
    if (!t->try_global) {
      if (got > 0) return finish(std::move(t), Served::kEscrow);
      add(fast_failures_, 1);
      absl::Status refused;
      {
        MutexLock lock(mu_);
        refused = absl::UnavailableError(absl::StrCat(
            "federation: the global coordinator is unhealthy (", last_error_,
            "); the next probe is due in ",
            reprobe_at_.load(std::memory_order_relaxed) - t->now, " ms"));
      }
      return fail(std::move(t), std::move(refused));
    }
    const int64_t need = t->want - got;
    // With an escrow the region leases `escrow_batch` per batch the
    // limiter asks for (proportionally less when the limiter sized its ask
    // down to the window's end), parking the excess. Not at a key's first
    // lease of a window: processes crossing together at the window's start
    // would each park a batch, and what a quiet region parks beyond its
    // demand is stranded when the window ends.
    const int64_t ask =
        c_.escrow != nullptr && t->paced
            ? std::max(need, need >= c_.batch
                                 ? c_.escrow_batch
                                 : static_cast<int64_t>(std::ceil(
                                       static_cast<double>(c_.escrow_batch) *
                                       static_cast<double>(need) /
                                       static_cast<double>(c_.batch))))
            : need;
    t->global_key = join_key(c_.prefix, t->key);
    if (t->wait) {
      Take& take = *t;
      on_global(std::move(t),
                c_.global->lease_windowed(c_.budget, take.global_key, ask));
      return;
    }
    const std::string global_key = t->global_key;
    c_.global->lease_windowed_async(
        c_.budget, global_key, ask, 0,
        [this, t = std::move(t)](absl::StatusOr<LeaseGrant> g) mutable {
          on_global(std::move(t), std::move(g));
        });
  }

  void on_global(TakePtr t, absl::StatusOr<LeaseGrant> g) {
    const int64_t got = t->from_escrow.granted;
    if (!g.ok()) {
      if (is_outage(g.status())) mark_unhealthy(t->now, g.status());
      if (got > 0) return finish(std::move(t), Served::kEscrow);
      return fail(std::move(t), g.status());
    }
    healthy_.store(true, std::memory_order_release);
    add(global_leases_, 1);
    add(global_credits_, g->granted);
    const int64_t keep = std::min(g->granted, t->want - got);
    t->excess = g->granted - keep;
    int64_t total = keep;
    if (got > 0) {
      if (t->from_escrow.expires_at_ms == g->expires_at_ms) {
        total += got;
      } else {
        add(forfeited_credits_, got);  // an older window's: dead
      }
    }
    // The window is spent for this process when neither the coordinator
    // nor the region's escrow holds anything more.
    t->grant =
        LeaseGrant{total, g->window_remaining + t->escrow_left + t->excess,
                   g->window_start_ms, g->expires_at_ms, g->now_ms};
    if (t->excess > 0) return park(std::move(t));
    finish(std::move(t), Served::kGlobal);
  }

  // Puts the grant's excess in the region's escrow; if the escrow cannot
  // take it, gives it back to the global window rather than strand it. The
  // take completes once the excess is placed.
  void park(TakePtr t) {
    const std::string escrow_key = join_key(c_.escrow_prefix, t->key);
    const int64_t excess = t->excess, start = t->grant.window_start_ms,
                  end = t->grant.expires_at_ms;
    if (t->wait) {
      on_parked(std::move(t),
                c_.escrow->escrow_refill(escrow_key, excess, start, end));
      return;
    }
    c_.escrow->escrow_refill_async(
        escrow_key, excess, start, end, 0,
        [this, t = std::move(t)](absl::StatusOr<int64_t> r) mutable {
          on_parked(std::move(t), std::move(r));
        });
  }

  void on_parked(TakePtr t, absl::StatusOr<int64_t> refilled) {
    if (refilled.ok()) {
      add(escrow_refills_, 1);
      return finish(std::move(t), Served::kGlobal);
    }
    add(escrow_errors_, 1);
    const std::string token = region_token(tokens_.next("park"));
    const std::string global_key = t->global_key;
    const int64_t start = t->grant.window_start_ms, excess = t->excess;
    if (t->wait) {
      on_returned(std::move(t), c_.global->reconcile(c_.budget, global_key,
                                                     start, excess, token));
      return;
    }
    c_.global->reconcile_async(
        c_.budget, global_key, start, excess, token, 0,
        [this, t = std::move(t)](absl::StatusOr<int64_t> back) mutable {
          on_returned(std::move(t), std::move(back));
        });
  }

  void on_returned(TakePtr t, absl::StatusOr<int64_t> back) {
    if (back.ok()) add(reconciled_credits_, *back);
    finish(std::move(t), Served::kGlobal);
  }

  // Which answer a take gives: the escrow's grant alone, or the combined
  // grant of the global lease.
  enum class Served { kEscrow, kGlobal };

  // Runs the take's completion with its grant (no lock held), then frees
  // the take.
  static void finish(TakePtr t, Served served) {
    const LeaseGrant g = served == Served::kEscrow ? t->from_escrow : t->grant;
    std::move(t->done)(g);
  }
  static void fail(TakePtr t, absl::Status error) {
    std::move(t->done)(std::move(error));
  }

  void mark_unhealthy(int64_t now, const absl::Status& error) {
    add(global_outages_, 1);
    {
      MutexLock lock(mu_);
      last_error_ = std::string(error.message());
    }
    reprobe_at_.store(now + c_.health_check_ms, std::memory_order_release);
    healthy_.store(false, std::memory_order_release);
  }

  const Config c_;
  // A fixed-window strategy, only to name the keys `Coordinator::reset`
  // deletes.
  const AnyStrategy reset_strategy_;
  std::atomic<bool> healthy_{true};
  std::atomic<int64_t> reprobe_at_{0};
  // Unique park tokens (the leased limiter's give-backs use their own).
  GiveBackTokens tokens_;
  Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> global_leases_{0}, global_credits_{0}, escrow_takes_{0},
      escrow_credits_{0}, escrow_refills_{0}, escrow_errors_{0},
      global_outages_{0}, fast_failures_{0}, forfeited_credits_{0},
      reconciled_credits_{0};
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_FEDERATION_INTERNAL_FEDERATION_SOURCE_H_
