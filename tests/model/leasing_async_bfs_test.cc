// The BFS twin of leasing with leases in flight: the search of
// leasing_bfs_test.cc, with each lease split into its request and its
// answer, so every interleaving of checks, answers and window rolls on one
// key is reached (docs/async.md, "Design: the leased engine").
//
// The abstract state, per the production miss path:
//   pool        credits the store's current window still holds
//   local[i]    node i's live credits
//   admitted    admissions since the window began
//   waiting[i]  node i's checks waiting for its lease in flight (<= W)
//   want[i]     the `want` of node i's lease in flight (0: none)
//   spent[i]    node i was told the window is spent (denies without asking)
// The actions:
//   Check(i)    a cost-1 check at node i (`check_async`): a local spend if
//               it holds a credit; else a denial if spent; else it joins
//               the lease in flight (up to W waiters; beyond, the harness
//               sends nothing); else it issues a lease of B and waits.
//   Deliver(i)  node i's lease reaches the store, which grants
//               g = min(want, pool), and the grant reaches node i: the
//               waiters spend it in order; the rest are denied if the pool
//               is now empty (and the node marked spent), else lease again
//               for max(B, min(L, their number)).
//   Roll        the window ends: pool L, admitted 0, spent cleared;
//               window-coupled credits die; leases in flight stay in
//               flight (a lease requested in one window may be granted in
//               the next).
//
// The twin realises each action on real objects: N `LeasedLimiter`s, each
// over a `HeldCoordinator` (tests/support/held_coordinator.h) in front of
// one `MemoryCoordinator` on a `ManualClock`; Deliver(i) delivers node i's
// held lease. The abstract state is read back from them (waiting: the
// completions not yet run; want: the lease held; spent: whether node i's
// last answer in this window left the pool empty). The production graph
// must equal the graph of the transitions written out below, edge for
// edge; the bounds are asserted over every reachable state: window-coupled,
// at most L admitted per window and admitted + pool + sum(local) == L;
// carried, at most L + N(B-1), reached.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "support/held_coordinator.h"
#include "support/leasing_twin.h"
#include "support/manual_store.h"
#include "support/path_bfs.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace leasing_async_bfs_test {
namespace {

using Limiter = testing::TwinLimiter;
constexpr int64_t kWindowMs = testing::kTwinWindowMs;

// {{N, L, B, coupled}, W}.
struct Config : testing::LeasingConfig {
  int64_t max_waiting;  // W
};

using State = std::vector<int64_t>;
// 0 .. N-1: Check(i); N .. 2N-1: Deliver(i); 2N: Roll.
using Action = int;

// Indices into a State.
struct Layout {
  int n;
  int pool() const { return 0; }
  int local(int i) const { return 1 + i; }
  int admitted() const { return 1 + n; }
  int waiting(int i) const { return 2 + n + i; }
  int want(int i) const { return 2 + 2 * n + i; }
  int spent(int i) const { return 2 + 3 * n + i; }
  int size() const { return 2 + 4 * n; }
};

// The transitions, as the header describes them.
State spec_step(const Config& c, const State& s, Action a) {
  const Layout at{c.n};
  State t = s;
  if (a == 2 * c.n) {  // Roll
    t[at.pool()] = c.limit;
    t[at.admitted()] = 0;
    for (int i = 0; i < c.n; ++i) {
      t[at.spent(i)] = 0;
      if (c.coupled) t[at.local(i)] = 0;
    }
    return t;
  }
  if (a < c.n) {  // Check(i)
    const int i = a;
    if (t[at.local(i)] >= 1) {
      --t[at.local(i)];
      ++t[at.admitted()];
    } else if (t[at.spent(i)] != 0) {
      // denied without asking
    } else if (t[at.want(i)] > 0) {
      if (t[at.waiting(i)] < c.max_waiting) ++t[at.waiting(i)];
    } else {
      t[at.want(i)] = c.batch;
      t[at.waiting(i)] = 1;
    }
    return t;
  }
  const int i = a - c.n;  // Deliver(i)
  if (t[at.want(i)] == 0) return t;
  const int64_t g = std::min(t[at.want(i)], t[at.pool()]);
  t[at.pool()] -= g;
  t[at.local(i)] += g;
  const int64_t served = std::min(t[at.waiting(i)], t[at.local(i)]);
  t[at.local(i)] -= served;
  t[at.admitted()] += served;
  t[at.waiting(i)] -= served;
  const bool dry = t[at.pool()] == 0;
  if (t[at.waiting(i)] > 0 && !dry) {
    t[at.want(i)] = std::max(c.batch, std::min(c.limit, t[at.waiting(i)]));
  } else {
    t[at.waiting(i)] = 0;  // served, or denied: the window is spent
    t[at.want(i)] = 0;
  }
  t[at.spent(i)] = dry ? 1 : 0;
  return t;
}

// A fleet of production limiters replaying a path.
class Fleet : public testing::ManualStore {
 public:
  explicit Fleet(const Config& c) : c_(c), at_{c.n} {
    for (int i = 0; i < c.n; ++i) {
      held_.push_back(std::make_shared<testing::HeldCoordinator>(store));
      nodes_.push_back(testing::leasing_node(c, held_.back(), clock));
    }
    pending_.assign(c.n, 0);
    spent_.assign(c.n, 0);
  }

  // A limiter waits for its leases in flight when destroyed: answer them
  // (as an outage; the fleet is discarded).
  ~Fleet() {
    for (auto& h : held_) {
      h->fail_next(1 << 30, absl::CancelledError("replay over"));
      h->deliver_all();
    }
  }

  void apply(Action a) {
    if (a == 2 * c_.n) {
      clock.advance_ms(kWindowMs);
      window_leased_base_ = leased();
      admitted_ = 0;
      std::fill(spent_.begin(), spent_.end(), 0);
      return;
    }
    if (a < c_.n) {
      const int i = a;
      const bool queued = !held_[i]->wants().empty();
      if (queued && nodes_[i]->credits("k") < 1 && spent_[i] == 0 &&
          pending_[i] >= c_.max_waiting) {
        return;  // the harness caps the waiters at W
      }
      ++pending_[i];
      nodes_[i]->check_async("k", 1, [this, i](absl::StatusOr<Decision> d) {
        --pending_[i];
        if (absl::IsCancelled(d.status())) return;  // the replay is over
        ASSERT_TRUE(d.ok()) << d.status();
        if (!d->allowed) return;
        ++admitted_;
        if (c_.coupled) {
          // Coupled: every admission spends a credit of the current window.
          EXPECT_EQ(d->reset_at_ms, window_end());
        }
      });
      return;
    }
    const int i = a - c_.n;
    if (!held_[i]->deliver_one()) return;
    absl::StatusOr<LeaseGrant> g = held_[i]->last_delivered();
    ASSERT_TRUE(g.ok()) << g.status();
    spent_[i] = g->window_remaining == 0 ? 1 : 0;
  }

  // The abstract state, read from the limiters.
  State observe() const {
    State s(at_.size(), 0);
    s[at_.pool()] = c_.limit - (leased() - window_leased_base_);
    for (int i = 0; i < c_.n; ++i) {
      s[at_.local(i)] = testing::live_credits(*nodes_[i]);
      s[at_.waiting(i)] = pending_[i];
      const std::vector<int64_t> wants = held_[i]->wants();
      EXPECT_LE(wants.size(), 1u) << "one lease in flight per key and node";
      s[at_.want(i)] = wants.empty() ? 0 : wants.front();
      s[at_.spent(i)] = spent_[i];
    }
    s[at_.admitted()] = admitted_;
    return s;
  }

 private:
  int64_t leased() const { return testing::leased_credits(nodes_); }
  int64_t window_end() const {
    return (clock.now_ms() / kWindowMs + 1) * kWindowMs;
  }

  Config c_;
  Layout at_;
  std::vector<std::shared_ptr<testing::HeldCoordinator>> held_;
  std::vector<std::unique_ptr<Limiter>> nodes_;
  std::vector<int64_t> pending_, spent_;
  int64_t window_leased_base_ = 0;
  int64_t admitted_ = 0;
};

using Graph = testing::BfsGraph<State>;

// The production twin, checked against the transitions edge for edge,
// from the initial state (full pool, nothing in flight).
Graph checked_graph(const Config& c) {
  const Layout at{c.n};
  State init(at.size(), 0);
  init[at.pool()] = c.limit;
  const Graph prod = testing::checked_twin_graph<Fleet>(
      init, 2 * c.n + 1, at.admitted(),
      [&](const State& s, Action a) { return spec_step(c, s, a); }, c);
  for (const auto& [s, next] : prod.next) {
    if (!c.coupled) continue;
    // Window-coupled, the window's budget is conserved with leases in
    // flight: admitted + pool + sum(local) == L.
    int64_t sum = s[at.pool()] + s[at.admitted()];
    for (int i = 0; i < c.n; ++i) sum += s[at.local(i)];
    EXPECT_EQ(sum, c.limit);
  }
  return prod;
}

struct Case {
  Config c;
  size_t states;  // reachable abstract states (pinned: a change is seen)
};

TEST(LeasingAsyncBfs, WindowCoupledAdmitsAtMostLWithLeasesInFlight) {
  for (const Case& k :
       {Case{{{1, 5, 2, true}, 3}, 15}, Case{{{2, 4, 2, true}, 2}, 43},
        Case{{{2, 6, 3, true}, 2}, 65}, Case{{{3, 4, 2, true}, 1}, 107}}) {
    const Graph g = checked_graph(k.c);
    EXPECT_EQ(g.next.size(), k.states) << "N=" << k.c.n << " L=" << k.c.limit;
    EXPECT_EQ(g.max_admitted, k.c.limit) << "N=" << k.c.n << " L=" << k.c.limit;
  }
}

TEST(LeasingAsyncBfs, CarriedCreditsOvershootByAtMostNTimesBMinusOne) {
  for (const Case& k :
       {Case{{{1, 5, 2, false}, 3}, 31}, Case{{{2, 4, 2, false}, 2}, 144},
        Case{{{2, 6, 3, false}, 2}, 390}}) {
    const Graph g = checked_graph(k.c);
    EXPECT_EQ(g.next.size(), k.states) << "N=" << k.c.n << " L=" << k.c.limit;
    // L + N(B-1): reached, and the maximum over every reachable state.
    EXPECT_EQ(g.max_admitted, k.c.limit + k.c.n * (k.c.batch - 1))
        << "N=" << k.c.n << " L=" << k.c.limit;
  }
}

}  // namespace
}  // namespace leasing_async_bfs_test
}  // namespace throttlekit
