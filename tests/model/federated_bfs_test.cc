// The BFS twin of spec/GaleFederatedLeasing.tla: a breadth-first search over
// every state a federation of K regions can reach on one key, driving the
// production `FederatedLimiter`s over one `MemoryCoordinator` (the global
// coordinator) on a `ManualClock`.
//
// The abstract state is (budget, balance[1..K], admitted): what the
// coordinator's window still holds, each region's live credits, and the
// admissions since the window began. The actions, as in the spec:
//
//   Check(r)  a cost-1 request in region r: a local spend if it holds a
//             credit; else, if the budget is not empty, one lease of
//             min(B, budget) and the spend of the request that missed, in
//             one step (production's miss path); else a denial.
//   Roll      the window ends: the budget is L again, `admitted` 0, and
//             every region's credits die with their window.
//
// Each action is realised on the real limiters (Check(r) is
// `regions[r]->check("k")`, Roll advances the clock one window) and the
// abstract state is read back from them; a state is reached again by
// replaying its path on a fresh federation. The same search over the
// spec's transitions must find the same graph, edge for edge; the bound
// admitted <= L is asserted in every state, and the tight invariant
// admitted <= L - 1 must be violated (the bound is reached).
//
// The spec's Reconcile action (a region giving its leftover back within
// the window) is a superset of production's: a process whose last grant
// emptied the window marks it spent and does not lease again until it
// ends, which only removes transitions, so the spec's invariants hold for
// production a fortiori. It is checked by spin (spec/promela).
//
// A second search, over production alone, adds the regional escrow: two
// regions of two processes, each region pooling through its own escrow,
// each check 1 ms after the last (a process parks credits for its peers
// only once it has a pace in the window). It asserts in every reached
// state that the window's budget is conserved (admitted + budget + escrows
// + balances = L) and so bounded. The abstract state adds which processes
// have a pace; a process's spent mark stays hidden, so each state's
// successors are explored along the path that first reached it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/manual_store.h"
#include "support/path_bfs.h"
#include "throttlekit/federation/federated_limiter.h"

namespace throttlekit {
namespace federated_bfs_test {
namespace {

using Limiter = BasicFederatedLimiter<testing::ManualClockRef>;
constexpr int64_t kWindowMs = 1000;

struct Config {
  int regions;
  int64_t limit;
  int64_t batch;
  // Production's default sizes a window's first lease to what the region
  // spent in the window before; the spec leases a whole batch.
  bool size_to_demand = false;
};

// budget, balance[0..K), admitted.
using State = std::vector<int64_t>;
// 0 .. K-1 is Check(r), K is Roll.
using Action = int;

// The spec's next-state relation (WithReconcile = FALSE).
State spec_step(const Config& c, const State& s, Action a) {
  State t = s;
  if (a == c.regions) {  // Roll
    t.assign(s.size(), 0);
    t[0] = c.limit;
    return t;
  }
  int64_t& balance = t[1 + a];
  if (balance > 0) {  // Serve
    --balance;
    ++t[c.regions + 1];
  } else if (t[0] > 0) {  // LeaseAndServe
    const int64_t g = std::min(c.batch, t[0]);
    t[0] -= g;
    balance = g - 1;
    ++t[c.regions + 1];
  }  // else: denied, unchanged
  return t;
}

AnyStrategy window(int64_t limit) {
  return *make_strategy(
      FixedWindow::Options{.limit = limit, .window_ms = kWindowMs});
}

// A federation of production limiters replaying a path.
class Federation : public testing::ManualStore {
 public:
  explicit Federation(const Config& c) : c_(c) {
    for (int r = 0; r < c.regions; ++r) {
      regions_.push_back(*Limiter::create(window(c.limit), store,
                                          {.region = "r" + std::to_string(r),
                                           .batch = c.batch,
                                           .max_keys = 16,
                                           .background_worker = false,
                                           .size_to_demand = c.size_to_demand},
                                          testing::ManualClockRef(clock)));
    }
  }

  void apply(Action a) {
    if (a == c_.regions) {
      clock.advance_ms(kWindowMs);
      base_ = leased();
      admitted_ = 0;
      return;
    }
    absl::StatusOr<Decision> d = regions_[a]->check("k");
    ASSERT_TRUE(d.ok()) << d.status();
    if (d->allowed) ++admitted_;
  }

  State observe() const {
    State s(c_.regions + 2);
    s[0] = c_.limit - (leased() - base_);
    for (int r = 0; r < c_.regions; ++r) {
      s[1 + r] = static_cast<int64_t>(regions_[r]->credits("k"));
    }
    s[c_.regions + 1] = admitted_;
    return s;
  }

 private:
  int64_t leased() const {
    int64_t sum = 0;
    for (const auto& r : regions_) sum += r->stats().global_credits;
    return sum;
  }

  Config c_;
  std::vector<std::unique_ptr<Limiter>> regions_;
  int64_t base_ = 0;
  int64_t admitted_ = 0;
};

using Graph = testing::BfsGraph<State>;
// Breadth-first search from `init` over `actions` actions
// (testing::path_bfs); the most admitted is read at `admitted_at`.
using testing::admission_bfs;

State initial(const Config& c) {
  State s(c.regions + 2, 0);
  s[0] = c.limit;
  return s;
}

Graph production_graph(const Config& c) {
  return admission_bfs(initial(c), c.regions + 1, c.regions + 1,
                       testing::replay_step<Federation>(c));
}

// The production twin, checked against the spec graph edge for edge.
Graph checked_graph(const Config& c) {
  Graph prod = testing::checked_twin_graph<Federation>(
      initial(c), c.regions + 1, c.regions + 1,
      [&](const State& s, Action a) { return spec_step(c, s, a); }, c);
  for (const auto& [s, next] : prod.next) {
    // Conservation and the bound, in every reachable state.
    int64_t sum = s[0] + s[c.regions + 1];
    for (int r = 0; r < c.regions; ++r) sum += s[1 + r];
    EXPECT_EQ(sum, c.limit);
    EXPECT_LE(s[c.regions + 1], c.limit);
  }
  return prod;
}

TEST(FederatedBfs, ThreeRegionsReachTheSpecs27StatesAndAdmitAtMostLimit) {
  const Config c{3, 6, 3};
  const Graph g = checked_graph(c);
  EXPECT_EQ(g.next.size(), 27u);
  // admitted <= Limit holds in every state, and the tight invariant
  // admitted <= Limit - 1 is violated: the bound is reached.
  EXPECT_EQ(g.max_admitted, c.limit);
}

TEST(FederatedBfs, TheBoundHoldsForEveryRegionCount) {
  for (const Config c :
       {Config{1, 6, 3}, Config{2, 4, 2}, Config{4, 8, 2}, Config{5, 10, 2}}) {
    const Graph g = checked_graph(c);
    EXPECT_EQ(g.max_admitted, c.limit) << "K=" << c.regions;
  }
}

// The production default (leases sized to the region's demand) only ever
// asks for less than a batch: a subset of the spec's choices. Every state
// it reaches conserves the window's budget and admits at most L.
TEST(FederatedBfs, DemandSizedLeasesKeepTheBoundInEveryReachedState) {
  for (const Config c : {Config{3, 6, 3, true}, Config{2, 8, 4, true}}) {
    const Graph g = production_graph(c);
    for (const auto& [s, next] : g.next) {
      int64_t sum = s[0] + s[c.regions + 1];
      for (int r = 0; r < c.regions; ++r) sum += s[1 + r];
      EXPECT_EQ(sum, c.limit);
    }
    EXPECT_EQ(g.max_admitted, c.limit) << "K=" << c.regions;
    std::printf("demand-sized federation (%d, %lld, %lld): %zu states\n",
                c.regions, static_cast<long long>(c.limit),
                static_cast<long long>(c.batch), g.next.size());
  }
}

// Two regions of two processes, each region with its own escrow:
// production alone, exhaustively. State: budget, escrow[0..2), balance of
// the four processes, admitted.
TEST(FederatedBfs, RegionalEscrowsConserveTheWindowsBudgetInEveryState) {
  constexpr int64_t kLimit = 8, kBatch = 2, kEscrowBatch = 4;
  constexpr int kProcesses = 4;  // processes 0, 1 in r0; 2, 3 in r1
  struct EscrowFederation : testing::ManualStore {
    std::vector<std::shared_ptr<Coordinator>> escrows;
    std::vector<std::unique_ptr<Limiter>> procs;
    int64_t base = 0, admitted = 0;
    EscrowFederation() {
      for (int r = 0; r < 2; ++r) {
        escrows.push_back(*MemoryCoordinator::create(
            {}, std::make_shared<ClockAdapter<testing::ManualClockRef>>(
                    testing::ManualClockRef(clock))));
      }
      for (int p = 0; p < kProcesses; ++p) {
        procs.push_back(*Limiter::create(window(kLimit), store,
                                         {.region = "r" + std::to_string(p / 2),
                                          .batch = kBatch,
                                          .regional_escrow = escrows[p / 2],
                                          .escrow_batch = kEscrowBatch,
                                          .max_keys = 16,
                                          .background_worker = false},
                                         testing::ManualClockRef(clock)));
      }
    }
    int64_t leased() const {
      int64_t sum = 0;
      for (const auto& p : procs) sum += p->stats().global_credits;
      return sum;
    }
    // Each check is 1 ms after the previous step (a process's pace needs
    // time to pass); Roll moves to the same offset in the next window.
    void apply(Action a) {
      if (a == kProcesses) {
        clock.advance_ms(kWindowMs);
        base = leased();
        admitted = 0;
        std::fill(paced, paced + kProcesses, 0);
        return;
      }
      clock.advance_ms(1);
      absl::StatusOr<Decision> d = procs[a]->check("k");
      ASSERT_TRUE(d.ok()) << d.status();
      if (d->allowed) {
        ++admitted;
        paced[a] = 1;
      }
    }
    // Whether each process has spent in this window (it then has a pace,
    // and its crossings park credits for its peers).
    int64_t paced[kProcesses] = {};
    State observe() {
      State s;
      s.push_back(kLimit - (leased() - base));
      for (int r = 0; r < 2; ++r) {
        absl::StatusOr<LeaseGrant> peek = escrows[r]->escrow_take(
            "tk:l2:r" + std::to_string(r) + ":k", kMaxSafeInteger);
        const int64_t held = peek.ok() ? peek->granted : -1;
        // Put it back (the take was only a read).
        if (held > 0) {
          escrows[r]
              ->escrow_refill("tk:l2:r" + std::to_string(r) + ":k", held,
                              peek->window_start_ms, peek->expires_at_ms)
              .IgnoreError();
        }
        s.push_back(held);
      }
      for (const auto& p : procs) {
        s.push_back(static_cast<int64_t>(p->credits("k")));
      }
      s.insert(s.end(), paced, paced + kProcesses);
      s.push_back(admitted);
      return s;
    }
  };
  State init(1 + 2 + 2 * kProcesses + 1, 0);
  init[0] = kLimit;
  const size_t admitted_at = init.size() - 1;
  const Graph g = admission_bfs(init, kProcesses + 1, admitted_at,
                                testing::replay_step<EscrowFederation>());
  bool escrow_held = false, process_held = false;
  for (const auto& [s, next] : g.next) {
    int64_t sum = s[admitted_at];
    for (int i = 0; i < 3 + kProcesses; ++i) sum += s[i];
    EXPECT_EQ(sum, kLimit) << "conservation";
    EXPECT_LE(s[admitted_at], kLimit);
    escrow_held |= s[1] > 0 || s[2] > 0;
    for (int p = 0; p < kProcesses; ++p) process_held |= s[3 + p] > 0;
  }
  // The search went where credits sit in escrows and in processes, and
  // reached the bound.
  EXPECT_TRUE(escrow_held);
  EXPECT_TRUE(process_held);
  EXPECT_EQ(g.max_admitted, kLimit);
  std::printf(
      "escrow federation (2 regions x 2 processes, L %lld, B %lld, "
      "escrow batch %lld): %zu states\n",
      static_cast<long long>(kLimit), static_cast<long long>(kBatch),
      static_cast<long long>(kEscrowBatch), g.next.size());
}

}  // namespace
}  // namespace federated_bfs_test
}  // namespace throttlekit
