// The BFS twin of spec/GaleHeartbeatLeasing.tla: a breadth-first search
// over every state a fleet of nodes sharing one concurrency limit L can
// reach, with the coordinator's step run by the production code.
//
// The abstract state is (active, share[1..N], inflight[1..N]). The actions,
// as in the spec:
//
//   Reallocate(n)  the coordinator's step for n: the equal split of L over
//                  the active nodes, capped by the others' reserves.
//   Join(n)        n becomes active with share 0.
//   Leave(n)       n is evicted (another node stays): its share and its
//                  in-flight work are gone.
//   Acquire(n)     n takes a slot below its share.
//   Release(n)     n settles a slot.
//
// The production twin realises Reallocate(n) as `heartbeat_step` (the
// function every backend runs, or transcribes) over the node table the
// abstract state stands for: one row per active node with its share and its
// current in-flight (reports are synchronous in this spec), the beat of n
// reporting its in-flight, and reads n's new share back; the step must
// change nothing else. Join, Leave, Acquire and Release are the table and
// node edits they name. The spec's transitions (written out below) must
// give the same graph, edge for edge. The counts: 76 states for (2, 4)
// (the original's), 149, 459 and 1432 for (2, 6), (3, 4) and (3, 6). With
// the original's split, ceil(L / |active|) for every node, the counts are
// the same except (3, 4): 361 (our split gives the remainder to the lowest
// ids, as production does). The share-only cap (reserve = share) is
// searched on the spec side: 64 states for (2, 4), and sum(inflight)
// peaks at exactly 1.5 L for two nodes.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit {
namespace heartbeat_bfs_test {
namespace {

struct Config {
  int n;
  int64_t limit;
};

enum class Split { kProduction, kCeil };

// active[0..N), share[0..N), inflight[0..N) in one vector.
using State = std::vector<int64_t>;
// 5 actions per node: Reallocate, Join, Leave, Acquire, Release.
using Action = int;
constexpr int kActions = 5;

int64_t& active(State& s, int i) { return s[i]; }
int64_t& share(State& s, const Config& c, int i) { return s[c.n + i]; }
int64_t& inflight(State& s, const Config& c, int i) { return s[2 * c.n + i]; }
int64_t get(const State& s, int at) { return s[at]; }

int64_t active_count(const Config& c, const State& s) {
  int64_t k = 0;
  for (int i = 0; i < c.n; ++i) k += get(s, i);
  return k;
}

// The spec's Reallocate: target, then the cap; `share_only` reserves the
// share alone.
int64_t spec_share(const Config& c, const State& s, int n, Split split,
                   bool share_only) {
  const int64_t k = active_count(c, s);
  int64_t rank = 0;
  for (int m = 0; m < n; ++m) rank += get(s, m);
  const int64_t target = split == Split::kCeil
                             ? (c.limit + k - 1) / k
                             : c.limit / k + (rank < c.limit % k ? 1 : 0);
  int64_t reserved = 0;
  for (int m = 0; m < c.n; ++m) {
    if (m == n || get(s, m) == 0) continue;
    const int64_t sh = get(s, c.n + m);
    const int64_t in = get(s, 2 * c.n + m);
    reserved += share_only ? sh : std::max(sh, in);
  }
  return std::max<int64_t>(0, std::min(target, c.limit - reserved));
}

// The spec's next-state relation; returns false when `a` is not enabled.
bool spec_step(const Config& c, const State& s, Action a, State* out,
               Split split = Split::kProduction, bool share_only = false) {
  const int n = a / kActions;
  State t = s;
  switch (a % kActions) {
    case 0:  // Reallocate
      if (get(s, n) == 0) return false;
      share(t, c, n) = spec_share(c, s, n, split, share_only);
      break;
    case 1:  // Join
      if (get(s, n) == 1) return false;
      active(t, n) = 1;
      share(t, c, n) = 0;
      break;
    case 2:  // Leave
      if (get(s, n) == 0 || active_count(c, s) < 2) return false;
      active(t, n) = 0;
      share(t, c, n) = 0;
      inflight(t, c, n) = 0;
      break;
    case 3:  // Acquire
      if (get(s, n) == 0 || get(s, 2 * c.n + n) >= get(s, c.n + n)) {
        return false;
      }
      ++inflight(t, c, n);
      break;
    default:  // Release
      if (get(s, 2 * c.n + n) == 0) return false;
      --inflight(t, c, n);
      break;
  }
  *out = t;
  return true;
}

std::string id(int i) { return "n" + std::to_string(i); }

// Reallocate(n) through the production step over the table `s` stands for.
int64_t production_share(const Config& c, const State& s, int n) {
  constexpr int64_t kNow = 1'000'000;
  const HeartbeatOptions o{.lease_ttl_ms = 1000};
  std::vector<HeartbeatNode> table;
  for (int m = 0; m < c.n; ++m) {
    if (get(s, m) == 0) continue;
    const int64_t sh = get(s, c.n + m);
    table.push_back({.id = id(m),
                     .seq = 1,
                     .local_limit = c.limit,
                     .inflight = get(s, 2 * c.n + m),
                     .expires_at_ms = kNow + 500,
                     .share = sh,
                     .generation = 1,
                     .acked_share = sh});
  }
  const std::vector<HeartbeatNode> before = table;
  absl::StatusOr<HeartbeatGrant> g =
      heartbeat_step(table,
                     {.node_id = id(n),
                      .seq = 2,
                      .applied_gen = 1,
                      .inflight = get(s, 2 * c.n + n),
                      .local_limit = c.limit},
                     kNow, o);
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(table.size(), before.size()) << "the step evicted a live node";
  for (size_t i = 0; i < table.size() && i < before.size(); ++i) {
    if (table[i].id != id(n)) {
      EXPECT_EQ(table[i].share, before[i].share);
    }
  }
  EXPECT_EQ(g->global_limit, c.limit);
  return g.ok() ? g->share : -1;
}

bool production_step(const Config& c, const State& s, Action a, State* out) {
  if (a % kActions != 0) return spec_step(c, s, a, out);  // table edits
  const int n = a / kActions;
  if (get(s, n) == 0) return false;
  State t = s;
  share(t, c, n) = production_share(c, s, n);
  *out = t;
  return true;
}

struct Graph {
  std::map<State, std::set<State>> next;
  int64_t max_shares = 0;
  int64_t max_inflight = 0;
};

template <class Step>
Graph bfs(const Config& c, Step step) {
  State init(3 * c.n, 0);
  for (int i = 0; i < c.n; ++i) init[i] = 1;  // every node active
  Graph g;
  std::set<State> seen{init};
  std::deque<State> queue{init};
  while (!queue.empty()) {
    const State s = queue.front();
    queue.pop_front();
    int64_t shares = 0, held = 0;
    for (int i = 0; i < c.n; ++i) {
      shares += get(s, c.n + i);
      held += get(s, 2 * c.n + i);
    }
    g.max_shares = std::max(g.max_shares, shares);
    g.max_inflight = std::max(g.max_inflight, held);
    std::set<State>& out = g.next[s];
    for (Action a = 0; a < kActions * c.n; ++a) {
      State t;
      if (!step(s, a, &t)) continue;
      out.insert(t);
      if (seen.insert(t).second) queue.push_back(t);
    }
  }
  return g;
}

Graph spec_graph(const Config& c, Split split = Split::kProduction,
                 bool share_only = false) {
  return bfs(c, [&](const State& s, Action a, State* t) {
    return spec_step(c, s, a, t, split, share_only);
  });
}

TEST(HeartbeatBfs, TheProductionStepIsTheSpecsReallocateOnEveryState) {
  struct Case {
    Config c;
    size_t states;
  };
  for (const Case& k : {Case{{2, 4}, 76}, Case{{2, 6}, 149}, Case{{3, 4}, 459},
                        Case{{3, 6}, 1432}}) {
    SCOPED_TRACE("N=" + std::to_string(k.c.n) +
                 " L=" + std::to_string(k.c.limit));
    const Graph spec = spec_graph(k.c);
    const Graph prod = bfs(k.c, [&](const State& s, Action a, State* t) {
      return production_step(k.c, s, a, t);
    });
    EXPECT_EQ(spec.next.size(), k.states);
    EXPECT_EQ(prod.next.size(), k.states);
    EXPECT_TRUE(prod.next == spec.next)
        << "the production step's transitions differ from the spec's";
    // SharesCap and InflightCap over every reachable state, and tight: L
    // is reached (the Tight invariants, <= L - 1, are violated).
    EXPECT_EQ(prod.max_shares, k.c.limit);
    EXPECT_EQ(prod.max_inflight, k.c.limit);
  }
}

// The original's split, ceil(L / |active|) for every node: the same state
// counts but for (3, 4), and the same bounds.
TEST(HeartbeatBfs, TheOriginalsCeilSplitGivesTheOriginalsCounts) {
  struct Case {
    Config c;
    size_t states;
  };
  for (const Case& k : {Case{{2, 4}, 76}, Case{{2, 6}, 149}, Case{{3, 4}, 361},
                        Case{{3, 6}, 1432}}) {
    const Graph g = spec_graph(k.c, Split::kCeil);
    EXPECT_EQ(g.next.size(), k.states) << k.c.n << " " << k.c.limit;
    EXPECT_EQ(g.max_shares, k.c.limit);
    EXPECT_EQ(g.max_inflight, k.c.limit);
  }
}

// Dropping the in-flight term of the reserve: the shares still sum to at
// most L, but a node whose share was lowered below its in-flight has the
// excess granted again: sum(inflight) peaks at exactly 1.5 L for two nodes
// (and higher for three).
TEST(HeartbeatBfs, AShareOnlyCapBreaksTheInflightBound) {
  struct Case {
    Config c;
    size_t states;
    int64_t peak;
  };
  for (const Case& k :
       {Case{{2, 4}, 64, 6}, Case{{2, 6}, 99, 9}, Case{{3, 6}, 2497, 11}}) {
    const Graph g = spec_graph(k.c, Split::kProduction, /*share_only=*/true);
    EXPECT_EQ(g.next.size(), k.states) << k.c.n << " " << k.c.limit;
    EXPECT_EQ(g.max_shares, k.c.limit);
    EXPECT_EQ(g.max_inflight, k.peak);
    EXPECT_GT(g.max_inflight, k.c.limit);
  }
}

}  // namespace
}  // namespace heartbeat_bfs_test
}  // namespace throttlekit
