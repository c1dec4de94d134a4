// The BFS twin of spec/GaleHeartbeatHandoff.tla: the distributed
// concurrency coordinator under grant and report lag, with the production
// `heartbeat_step` as the coordinator's transition.
//
// The abstract state, per node n:
//   node side        ap (generation of the grant applied), cap (its share:
//                    what the node admits below), inflight (slots held),
//                    a pending snapshot (ap, inflight) taken but not yet
//                    delivered, and the grants issued to it and not yet
//                    delivered (a channel: generation -> share);
//   coordinator row  (absent until n's first report) share, generation,
//                    acked share, max unacknowledged share, reported
//                    in-flight: exactly the fields of production's row.
// The actions:
//   Acquire(n)       inflight < cap: take a slot.
//   Release(n)       settle one.
//   Snapshot(n)      no snapshot pending: take (ap, inflight), atomically.
//   Report(n)        deliver the pending snapshot: the coordinator's step
//                    for n, which may issue a grant into n's channel.
//   Deliver(n, g)    grant g reaches n, out of order: applied if newer
//                    than ap, dropped otherwise.
// Generations are bounded by K per node (the history bound): a report that
// would issue generation K + 1 is not enabled.
//
// The production twin realises Report(n) as `heartbeat_step` over the
// table the rows stand for and reads the row and the grant back; the
// spec's Report is written out below. Their graphs must be equal, edge for
// edge, for acknowledged handoff and for the default cap. Then:
// - handoff: GlobalCap (sum of committed shares <= L) and InflightCap (sum
//   of true in-flight <= L) over every state, both reached;
// - the default cap (reserve = max(share, reported in-flight)): the
//   committed-snapshot rule, sum(inflight) peaks at exactly 1.5 L;
// - handoff without the max-unacknowledged term, or without the reported
//   in-flight term: InflightCap refuted (spec side, the search stops at the
//   first violation);
// - a torn snapshot (in-flight read before the applied generation):
//   refuted; the production order (generation, then in-flight) holds.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit {
namespace heartbeat_handoff_bfs_test {
namespace {

enum class Rule { kHandoff, kDefault, kNoUnacked, kNoInflight };
enum class Snap { kAtomic, kGenThenInflight, kInflightThenGen };

struct Config {
  int n = 2;
  int64_t limit = 4;
  int64_t k = 3;  // generations per node
  Rule rule = Rule::kHandoff;
  Snap snap = Snap::kAtomic;
};

struct Row {
  int64_t share = 0, gen = 0, acked = 0, max_unacked = 0, inflight = 0;
  auto operator<=>(const Row&) const = default;
};

struct Node {
  int64_t ap = 0, cap = 0, inflight = 0;
  // Snapshot: 0 none, 1 half taken (two-phase orders), 2 complete.
  int64_t snap = 0, snap_ap = 0, snap_inflight = 0;
  std::map<int64_t, int64_t> channel;  // generation -> share
  std::optional<Row> row;
  auto operator<=>(const Node&) const = default;
};

using State = std::vector<Node>;

std::string id(int i) { return "n" + std::to_string(i); }

// The spec's Report: production's row arithmetic written out (with the
// reserve rule of `c`). Returns the grant issued, if any.
std::optional<std::pair<int64_t, int64_t>> spec_report(const Config& c,
                                                       State& s, int n) {
  Node& me = s[n];
  const bool fresh = !me.row.has_value();
  Row r = me.row.value_or(Row{});
  r.gen = std::max(r.gen, me.snap_ap);
  if (me.snap_ap >= r.gen) {
    r.acked = r.share;
    r.max_unacked = 0;
  }
  r.inflight = me.snap_inflight;
  me.row = r;
  std::vector<int> live;
  for (int m = 0; m < c.n; ++m) {
    if (s[m].row.has_value()) live.push_back(m);
  }
  const int64_t k = static_cast<int64_t>(live.size());
  const int64_t rank = std::find(live.begin(), live.end(), n) - live.begin();
  const int64_t target = c.limit / k + (rank < c.limit % k ? 1 : 0);
  int64_t reserved = 0;
  for (int m : live) {
    if (m == n) continue;
    const Row& o = *s[m].row;
    switch (c.rule) {
      case Rule::kHandoff:
        reserved += std::max({o.acked, o.max_unacked, o.inflight});
        break;
      case Rule::kDefault:
        reserved += std::max(o.share, o.inflight);
        break;
      case Rule::kNoUnacked:
        reserved += std::max(o.acked, o.inflight);
        break;
      case Rule::kNoInflight:
        reserved += std::max(o.acked, o.max_unacked);
        break;
    }
  }
  const int64_t share =
      std::max<int64_t>(0, std::min(target, c.limit - reserved));
  Row& w = *me.row;
  if (fresh || share != w.share) {
    w.share = share;
    ++w.gen;
    if (w.gen > me.snap_ap) w.max_unacked = std::max(w.max_unacked, share);
    return std::make_pair(w.gen, share);
  }
  return std::nullopt;
}

// Production's Report: heartbeat_step over the table the rows stand for.
std::optional<std::pair<int64_t, int64_t>> production_report(const Config& c,
                                                             State& s, int n) {
  constexpr int64_t kNow = 1'000'000;
  std::vector<HeartbeatNode> table;
  for (int m = 0; m < c.n; ++m) {
    if (!s[m].row.has_value()) continue;
    const Row& r = *s[m].row;
    table.push_back({.id = id(m),
                     .seq = 1,
                     .local_limit = c.limit,
                     .inflight = r.inflight,
                     .expires_at_ms = kNow + 500,
                     .share = r.share,
                     .generation = r.gen,
                     .acked_share = r.acked,
                     .max_unacked = r.max_unacked});
  }
  const size_t rows_before = table.size();
  const int64_t old_gen = s[n].row.has_value() ? s[n].row->gen : 0;
  absl::StatusOr<HeartbeatGrant> g = heartbeat_step(
      table,
      {.node_id = id(n),
       .seq = 2,
       .applied_gen = s[n].snap_ap,
       .inflight = s[n].snap_inflight,
       .local_limit = c.limit},
      kNow, {.lease_ttl_ms = 1000, .handoff = c.rule == Rule::kHandoff});
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(table.size(), rows_before + (old_gen == 0 ? 1 : 0));
  for (const HeartbeatNode& row : table) {
    if (row.id != id(n)) continue;
    s[n].row = Row{row.share, row.generation, row.acked_share, row.max_unacked,
                   row.inflight};
  }
  if (!g.ok() || g->generation == old_gen) return std::nullopt;
  return std::make_pair(g->generation, g->share);
}

// Successors of `s` under the spec (or production's Report).
template <class Report>
std::vector<State> successors(const Config& c, const State& s, Report report) {
  std::vector<State> out;
  for (int n = 0; n < c.n; ++n) {
    const Node& x = s[n];
    if (x.inflight < x.cap) {  // Acquire
      State t = s;
      ++t[n].inflight;
      out.push_back(t);
    }
    if (x.inflight > 0) {  // Release
      State t = s;
      --t[n].inflight;
      out.push_back(t);
    }
    for (const auto& [g, share] : x.channel) {  // Deliver
      State t = s;
      t[n].channel.erase(g);
      if (g > x.ap) {
        t[n].ap = g;
        t[n].cap = share;
      }
      out.push_back(t);
    }
    if (x.snap == 0) {  // Snapshot (or its first half)
      State t = s;
      switch (c.snap) {
        case Snap::kAtomic:
          t[n].snap = 2;
          t[n].snap_ap = x.ap;
          t[n].snap_inflight = x.inflight;
          break;
        case Snap::kGenThenInflight:
          t[n].snap = 1;
          t[n].snap_ap = x.ap;
          break;
        case Snap::kInflightThenGen:
          t[n].snap = 1;
          t[n].snap_inflight = x.inflight;
          break;
      }
      out.push_back(t);
    } else if (x.snap == 1) {  // the second half, later
      State t = s;
      t[n].snap = 2;
      if (c.snap == Snap::kGenThenInflight) {
        t[n].snap_inflight = x.inflight;
      } else {
        t[n].snap_ap = x.ap;
      }
      out.push_back(t);
    } else {  // Report
      State t = s;
      const std::optional<std::pair<int64_t, int64_t>> grant = report(c, t, n);
      if (grant.has_value() && grant->first > c.k) continue;  // bound
      t[n].snap = 0;
      t[n].snap_ap = 0;
      t[n].snap_inflight = 0;
      if (grant.has_value()) t[n].channel[grant->first] = grant->second;
      out.push_back(t);
    }
  }
  return out;
}

// A state as bytes (every value is small), for the visited set.
std::string encode(const Config& c, const State& s) {
  std::string e;
  for (const Node& x : s) {
    for (int64_t v :
         {x.ap, x.cap, x.inflight, x.snap, x.snap_ap, x.snap_inflight}) {
      e.push_back(static_cast<char>(v));
    }
    for (int64_t g = 1; g <= c.k; ++g) {
      const auto it = x.channel.find(g);
      e.push_back(
          static_cast<char>(it == x.channel.end() ? 0 : it->second + 1));
    }
    e.push_back(x.row.has_value() ? 1 : 0);
    const Row r = x.row.value_or(Row{});
    for (int64_t v : {r.share, r.gen, r.acked, r.max_unacked, r.inflight}) {
      e.push_back(static_cast<char>(v));
    }
  }
  return e;
}

State decode(const Config& c, const std::string& e) {
  State s(c.n);
  size_t i = 0;
  const auto next = [&] { return static_cast<int64_t>(e[i++]); };
  for (Node& x : s) {
    x.ap = next();
    x.cap = next();
    x.inflight = next();
    x.snap = next();
    x.snap_ap = next();
    x.snap_inflight = next();
    for (int64_t g = 1; g <= c.k; ++g) {
      const int64_t v = next();
      if (v > 0) x.channel[g] = v - 1;
    }
    const bool has_row = next() != 0;
    Row r;
    r.share = next();
    r.gen = next();
    r.acked = next();
    r.max_unacked = next();
    r.inflight = next();
    if (has_row) x.row = r;
  }
  return s;
}

struct Search {
  size_t states = 0;
  int64_t max_committed = 0;
  int64_t max_inflight = 0;
  bool violated = false;  // sum(inflight) > L was reached
  size_t mismatches = 0;  // states where production's successors differ
};

std::set<std::string> encoded(const Config& c, const std::vector<State>& v) {
  std::set<std::string> out;
  for (const State& s : v) out.insert(encode(c, s));
  return out;
}

// Breadth-first over the spec's transitions. With `twin`, every state's
// successors under production's Report must be the spec's, as a set (the
// graphs are then equal edge for edge). Stops at the first state with
// sum(inflight) > L when `stop_at_violation`.
Search bfs(const Config& c, bool twin, bool stop_at_violation) {
  const State init(c.n);
  Search r;
  std::unordered_set<std::string> seen{encode(c, init)};
  std::deque<std::string> queue{encode(c, init)};
  while (!queue.empty()) {
    const State s = decode(c, queue.front());
    queue.pop_front();
    ++r.states;
    int64_t committed = 0, held = 0;
    for (const Node& x : s) {
      if (x.row.has_value()) committed += x.row->share;
      held += x.inflight;
    }
    r.max_committed = std::max(r.max_committed, committed);
    r.max_inflight = std::max(r.max_inflight, held);
    if (held > c.limit) {
      r.violated = true;
      if (stop_at_violation) return r;
    }
    const std::vector<State> next = successors(c, s, spec_report);
    if (twin && r.mismatches == 0 &&
        encoded(c, successors(c, s, production_report)) != encoded(c, next)) {
      ++r.mismatches;
      ADD_FAILURE() << "production's successors differ from the spec's at "
                       "state "
                    << r.states;
    }
    for (const State& t : next) {
      std::string e = encode(c, t);
      if (seen.insert(e).second) queue.push_back(std::move(e));
    }
  }
  return r;
}

TEST(HeartbeatHandoffBfs, HandoffHoldsBothCapsUnderGrantAndReportLag) {
  const Config c;  // 2 nodes, L 4, K 3, acknowledged handoff
  const Search s = bfs(c, /*twin=*/true, /*stop=*/false);
  EXPECT_EQ(s.states, 59346u);
  EXPECT_EQ(s.mismatches, 0u);
  // GlobalCap and InflightCap, both reached (their Tight forms refuted).
  EXPECT_EQ(s.max_committed, c.limit);
  EXPECT_EQ(s.max_inflight, c.limit);
  EXPECT_FALSE(s.violated);
}

// The default cap, max(share, reported in-flight), under the same lag (K 2:
// its space is larger): the committed shares stay within L, but
// sum(inflight) peaks at exactly 1.5 L.
TEST(HeartbeatHandoffBfs, TheDefaultCapPeaksAtOneAndAHalfL) {
  Config c;
  c.rule = Rule::kDefault;
  c.k = 2;
  const Search s = bfs(c, /*twin=*/true, /*stop=*/false);
  EXPECT_EQ(s.states, 293160u);
  EXPECT_EQ(s.mismatches, 0u);
  EXPECT_EQ(s.max_committed, c.limit);
  EXPECT_EQ(s.max_inflight, c.limit + c.limit / 2);
}

// Each reserve term is necessary: without either, InflightCap falls.
TEST(HeartbeatHandoffBfs, DroppingEitherReserveTermRefutesTheCap) {
  for (const Rule rule : {Rule::kNoUnacked, Rule::kNoInflight}) {
    Config c;
    c.rule = rule;
    EXPECT_TRUE(bfs(c, /*twin=*/false, /*stop=*/true).violated)
        << (rule == Rule::kNoUnacked ? "no max-unacked" : "no in-flight");
  }
}

// The snapshot must be atomic, or at least read the applied generation
// before the in-flight count (as DistributedConcurrency's beat does):
// in-flight read first and the generation later (a fresh generation with a
// stale in-flight) refutes the cap.
TEST(HeartbeatHandoffBfs, ATornSnapshotRefutesTheCap) {
  Config torn;
  torn.snap = Snap::kInflightThenGen;
  EXPECT_TRUE(bfs(torn, /*twin=*/false, /*stop=*/true).violated);
  Config ordered;
  ordered.snap = Snap::kGenThenInflight;
  const Search s = bfs(ordered, /*twin=*/false, /*stop=*/false);
  EXPECT_FALSE(s.violated);
  EXPECT_EQ(s.max_inflight, ordered.limit);
}

}  // namespace
}  // namespace heartbeat_handoff_bfs_test
}  // namespace throttlekit
