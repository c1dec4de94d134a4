// The BFS twin of spec/DistributedLeasing.tla (carried credits) and
// spec/GaleWindowCoupledLeasing.tla (window-coupled credits): a
// breadth-first search over every state a fleet of N leased limiters can
// reach on one key, driving the production code itself.
//
// The abstract state is (pool, local[1..N], admitted): the credits the
// store's window still holds, each node's live credits, and the admissions
// since the window began. The actions, as in the specs:
//
//   Check(i)  a cost-1 request at node i: a local spend if it holds a
//             credit; else, if the pool is not empty, one lease of
//             min(B, pool) and the spend of the request that missed, in one
//             step (the production miss path); else a denial (no change).
//   Roll      the window ends: the pool is L again and `admitted` 0;
//             window-coupled credits die, carried ones stay.
//
// The twin realises each action on real objects: N `LeasedLimiter`s over
// one `MemoryCoordinator` on a `ManualClock` (Check(i) is
// `nodes[i]->check("k")`, Roll advances the clock one window) and reads the
// abstract state back from them. A state is reached again by replaying its
// path from a fresh fleet. The same search over the specs' transitions
// (written out below) must find the same graph: every production successor
// of every reachable state is a spec successor and vice versa. The state
// counts are those of the issue; the bounds are asserted over every state.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "support/leasing_twin.h"
#include "support/manual_store.h"
#include "support/path_bfs.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace leasing_bfs_test {
namespace {

using Limiter = testing::TwinLimiter;
using Config = testing::LeasingConfig;
constexpr int64_t kWindowMs = testing::kTwinWindowMs;

// pool, local[0..N), admitted.
using State = std::vector<int64_t>;
// An action: 0 .. N-1 is Check(i), N is Roll.
using Action = int;

// The specs' transitions (the TLA+ next-state relation).
State spec_step(const Config& c, const State& s, Action a) {
  State t = s;
  if (a == c.n) {  // Roll
    t[0] = c.limit;
    t[c.n + 1] = 0;
    if (c.coupled) std::fill(t.begin() + 1, t.begin() + 1 + c.n, 0);
    return t;
  }
  int64_t& local = t[1 + a];
  if (local > 0) {  // Serve
    --local;
    ++t[c.n + 1];
  } else if (t[0] > 0) {  // LeaseAndServe
    const int64_t g = std::min(c.batch, t[0]);
    t[0] -= g;
    local = g - 1;
    ++t[c.n + 1];
  }  // else Deny: unchanged
  return t;
}

// A fleet of production limiters replaying a path.
class Fleet : public testing::ManualStore {
 public:
  explicit Fleet(const Config& c) : c_(c) {
    for (int i = 0; i < c.n; ++i) {
      nodes_.push_back(testing::leasing_node(c, store, clock));
    }
  }

  void apply(Action a) {
    if (a == c_.n) {
      clock.advance_ms(kWindowMs);
      window_leased_base_ = leased();
      admitted_ = 0;
      return;
    }
    absl::StatusOr<Decision> d = nodes_[a]->check("k");
    ASSERT_TRUE(d.ok()) << d.status();
    if (d->allowed) ++admitted_;
  }

  // The abstract state, read from the limiters.
  State observe() const {
    State s(c_.n + 2);
    s[0] = c_.limit - (leased() - window_leased_base_);
    for (int i = 0; i < c_.n; ++i) {
      s[1 + i] = testing::live_credits(*nodes_[i]);
    }
    s[c_.n + 1] = admitted_;
    return s;
  }

 private:
  int64_t leased() const { return testing::leased_credits(nodes_); }

  Config c_;
  std::vector<std::unique_ptr<Limiter>> nodes_;
  int64_t window_leased_base_ = 0;
  int64_t admitted_ = 0;
};

using Graph = testing::BfsGraph<State>;

// The production twin, checked against the spec graph edge for edge, from
// the initial state (full pool, no credits).
Graph checked_graph(const Config& c) {
  State init(c.n + 2, 0);
  init[0] = c.limit;
  Graph prod = testing::checked_twin_graph<Fleet>(
      init, c.n + 1, c.n + 1,
      [&](const State& s, Action a) { return spec_step(c, s, a); }, c);
  for (const auto& [s, next] : prod.next) {
    // Local credits are below the batch (a lease spends one at once) ...
    for (int i = 0; i < c.n; ++i) EXPECT_LT(s[1 + i], c.batch);
    if (!c.coupled) continue;
    // ... and, window-coupled, the window's budget is conserved:
    // admitted + pool + sum(local) == L (the spec's Conservation).
    int64_t sum = s[0] + s[c.n + 1];
    for (int i = 0; i < c.n; ++i) sum += s[1 + i];
    EXPECT_EQ(sum, c.limit);
  }
  return prod;
}

TEST(LeasingBfs, CarriedCreditsReachTheSpecsStatesAndTheTightOvershoot) {
  struct Case {
    Config c;
    size_t states;
  };
  // 31 / 441 / 992: the carried baselines federation is set beside
  // (spec/GaleFederatedLeasing.tla, docs/formal_model.md).
  for (const Case& k :
       {Case{{2, 4, 2, false}, 31}, Case{{3, 6, 3, false}, 441},
        Case{{5, 10, 2, false}, 992}, Case{{1, 7, 3, false}, 27}}) {
    const Graph g = checked_graph(k.c);
    EXPECT_EQ(g.next.size(), k.states) << "N=" << k.c.n;
    // L + N(B-1): reached (tight) and, being the maximum over every
    // reachable state, never exceeded.
    EXPECT_EQ(g.max_admitted, k.c.limit + k.c.n * (k.c.batch - 1))
        << "N=" << k.c.n;
  }
}

TEST(LeasingBfs, WindowCoupledCreditsReachTheSpecsStatesAndAdmitAtMostL) {
  struct Case {
    Config c;
    size_t states;
  };
  for (const Case& k : {Case{{2, 4, 2, true}, 8}, Case{{3, 6, 3, true}, 27},
                        Case{{5, 10, 2, true}, 112}}) {
    const Graph g = checked_graph(k.c);
    EXPECT_EQ(g.next.size(), k.states) << "N=" << k.c.n;
    EXPECT_EQ(g.max_admitted, k.c.limit) << "N=" << k.c.n;
  }
}

TEST(LeasingBfs, WindowCoupledMaxAdmittedIsLForAnyFleetSize) {
  for (int n : {1, 2, 4, 8}) {
    const Config coupled{n, 8, 2, true};
    EXPECT_EQ(checked_graph(coupled).max_admitted, 8) << "N=" << n;
    // The same fleet with carried credits overshoots: the search can see
    // a bound being broken.
    if (n > 1 && n <= 4) {
      const Config carried{n, 8, 2, false};
      EXPECT_EQ(checked_graph(carried).max_admitted, 8 + n) << "N=" << n;
    }
  }
}

}  // namespace
}  // namespace leasing_bfs_test
}  // namespace throttlekit
