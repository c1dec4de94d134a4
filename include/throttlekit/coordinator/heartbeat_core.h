// throttlekit/coordinator/heartbeat_core.h
//
// Provides `heartbeat_step`: the coordinator's half of distributed adaptive
// concurrency (docs/distributed_concurrency.md), one pure function
// over one key's node table: the reference every backend is held to. The
// memory coordinator runs it under a shard lock; Redis runs a Lua
// transcription (src/redis/lua/heartbeat.lua) and Postgres a PL/pgSQL one
// (src/postgres/heartbeat.sql), each one round trip, each held equal to it
// step for step by a conformance test: change the three together.
//
// Each node runs its own adaptive limiter (local limit L_local) and beats
// with one atomic snapshot of itself: {seq, applied_gen, inflight,
// L_local}. The step, for the beating node `self`:
//
// 1. Upsert self: a new node starts with share 0, and so does a node whose
//    row's lease has lapsed (it re-joins; only its generation is kept); a
//    beat of a live node whose `seq` is not newer than the stored one is
//    stale (delayed or reordered) and changes nothing: it gets the grant
//    already issued.
// 2. Evict every other node whose lease expired (`expires_at <= now`);
//    self survives (its lease was just renewed to now + lease_ttl_ms).
// 3. L_global = min of the live nodes' L_local, or their lower median
//    (element (n - 1) / 2 in ascending order). Never a sum: a sum would
//    re-introduce the N-fold fan-out this exists to remove.
// 4. Target: an equal split floor(L_global / n), the remainder one each to
//    the first ids in lexicographic order; or (opt-in) demand-proportional:
//    the max-min fair split of L_global over the nodes' reported demand,
//    each floored at 1 slot so every node can reveal demand.
// 5. The occupancy cap: share = max(0, min(target, L_global - sum over the
//    other live nodes of reserve(other))), where
//        reserve = max(share, inflight)                     (default)
//        reserve = max(acked, max_unacked, inflight)        (handoff)
//    The default makes sum(share) <= L_global a hard invariant and
//    sum(inflight) <= L_global synchronous. With acknowledged handoff the
//    coordinator reserves on the highest grant it issued that the node has
//    not acknowledged (`applied_gen` below the grant's generation), which a
//    lagging report cannot miss, so sum(inflight) <= L_global holds at
//    every instant under grant and report lag. Dropping either term, or a
//    torn report (a fresh applied_gen with a stale inflight), breaks it.
// 6. A grant whose share differs from the last one issued to the node, or
//    the first grant of a new or re-joined row, gets the node's next
//    generation (generations only grow per node id, also across an
//    eviction: a returning node's reported generation is the floor).
//
// Thread-safety: a pure function of its arguments; the caller provides the
// atomicity of one step over the table.

#ifndef THROTTLEKIT_COORDINATOR_HEARTBEAT_CORE_H_
#define THROTTLEKIT_COORDINATOR_HEARTBEAT_CORE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/water_filling.h"

namespace throttlekit {

enum class HeartbeatAggregate { kMin, kLowerMedian };

struct HeartbeatOptions {
  // How long a beat keeps its node alive; 1 .. 2^53-1 ms.
  int64_t lease_ttl_ms = 0;
  HeartbeatAggregate aggregate = HeartbeatAggregate::kMin;
  // Acknowledged handoff: reserve on unacknowledged grants (see step 5).
  bool handoff = false;
  // Targets from reported demand instead of an equal split.
  bool demand_proportional = false;
};

// One node's beat: an atomic snapshot of the node.
struct HeartbeatReport {
  std::string_view node_id;  // non-empty, at most 256 bytes
  int64_t seq = 0;           // strictly increasing per node, >= 1
  int64_t applied_gen = 0;   // generation of the last grant applied, >= 0
  int64_t inflight = 0;      // 0 .. 2^30
  int64_t local_limit = 0;   // the node's L_local, 0 .. 2^30
  int64_t demand = 0;        // slots wanted (demand-proportional), 0 .. 2^30
};

// One node's row.
struct HeartbeatNode {
  std::string id;
  int64_t seq = 0;
  int64_t local_limit = 0;
  int64_t inflight = 0;
  int64_t demand = 0;
  int64_t expires_at_ms = 0;
  int64_t share = 0;        // the last share issued
  int64_t generation = 0;   // the last share's generation
  int64_t acked_share = 0;  // the share of the last acknowledged grant
  int64_t max_unacked = 0;  // the highest share issued and not acknowledged
};

struct HeartbeatGrant {
  int64_t share = 0;
  int64_t generation = 0;
  int64_t global_limit = 0;
  int64_t live_nodes = 0;
  int64_t lease_expires_at_ms = 0;
  bool stale = false;  // the beat was not newer than the stored one
};

// What the cap reserves for `n` (step 5).
inline int64_t heartbeat_reserve(const HeartbeatNode& n, bool handoff) {
  if (!handoff) return std::max(n.share, n.inflight);
  return std::max({n.acked_share, n.max_unacked, n.inflight});
}

// OK iff `r` and `o` are in range; otherwise kInvalidArgument naming
// "heartbeat.<field>".
inline absl::Status validate_heartbeat(const HeartbeatReport& r,
                                       const HeartbeatOptions& o) {
  constexpr int64_t kMaxSlots = int64_t{1} << 30;
  const auto bad = [](const char* field, int64_t got) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat.", field, " out of range; got ", got));
  };
  if (r.node_id.empty() || r.node_id.size() > 256) {
    return absl::InvalidArgumentError(
        "heartbeat.node_id must be 1 .. 256 bytes");
  }
  if (r.seq < 1) return bad("seq", r.seq);
  if (r.applied_gen < 0) return bad("applied_gen", r.applied_gen);
  if (r.inflight < 0 || r.inflight > kMaxSlots) {
    return bad("inflight", r.inflight);
  }
  if (r.local_limit < 0 || r.local_limit > kMaxSlots) {
    return bad("local_limit", r.local_limit);
  }
  if (r.demand < 0 || r.demand > kMaxSlots) return bad("demand", r.demand);
  if (o.lease_ttl_ms < 1 || o.lease_ttl_ms > kMaxSafeInteger) {
    return bad("lease_ttl_ms", o.lease_ttl_ms);
  }
  return absl::OkStatus();
}

// Runs one coordinator step for `report` at `now_ms` over `table` (one
// key's nodes, kept sorted by id). kInvalidArgument names the field of a
// bad report or option; the table is then unchanged.
inline absl::StatusOr<HeartbeatGrant> heartbeat_step(
    std::vector<HeartbeatNode>& table, const HeartbeatReport& r, int64_t now_ms,
    const HeartbeatOptions& o) {
  if (absl::Status s = validate_heartbeat(r, o); !s.ok()) return s;

  // 1. Upsert self (the table stays sorted by id).
  auto it = std::lower_bound(
      table.begin(), table.end(), r.node_id,
      [](const HeartbeatNode& n, std::string_view id) { return n.id < id; });
  bool fresh = true;  // the row is new here (a first grant follows)
  if (it == table.end() || it->id != r.node_id) {
    it = table.insert(it, HeartbeatNode{.id = std::string(r.node_id)});
  } else if (it->expires_at_ms <= now_ms) {
    // Its lease lapsed (no peer's beat has evicted it yet): the node is
    // back, perhaps restarted with its seq starting over, and re-joins as
    // new; only its generation is kept.
    *it = HeartbeatNode{.id = it->id, .generation = it->generation};
  } else if (r.seq <= it->seq) {
    return HeartbeatGrant{it->share,         it->generation, 0, 0,
                          it->expires_at_ms,
                          /*stale=*/true};
  } else {
    fresh = false;
  }
  // Generations never go back for a node id: a node evicted and back (or
  // a coordinator that lost its table) reports a generation this table
  // never issued; the next grant must still be newer than it, or its
  // unacknowledged share would escape the reserve.
  it->generation = std::max(it->generation, r.applied_gen);
  it->seq = r.seq;
  it->local_limit = r.local_limit;
  it->inflight = r.inflight;
  it->demand = r.demand;
  it->expires_at_ms = now_ms + o.lease_ttl_ms;
  if (r.applied_gen >= it->generation) {
    // Every grant issued has been applied: the reserve falls back.
    it->acked_share = it->share;
    it->max_unacked = 0;
  }
  const std::string self_id = it->id;

  // 2. Evict expired peers; self was just renewed.
  std::erase_if(table, [&](const HeartbeatNode& n) {
    return n.expires_at_ms <= now_ms && n.id != self_id;
  });
  const size_t n = table.size();
  size_t self = 0;
  while (table[self].id != self_id) ++self;

  // 3. The global limit.
  std::vector<int64_t> locals;
  locals.reserve(n);
  for (const HeartbeatNode& x : table) locals.push_back(x.local_limit);
  int64_t global = 0;
  if (o.aggregate == HeartbeatAggregate::kMin) {
    global = *std::min_element(locals.begin(), locals.end());
  } else {
    std::nth_element(locals.begin(), locals.begin() + (n - 1) / 2,
                     locals.end());
    global = locals[(n - 1) / 2];
  }

  // 4. The target.
  int64_t target = 0;
  if (o.demand_proportional) {
    std::vector<WaterClaim> claims;
    claims.reserve(n);
    for (const HeartbeatNode& x : table) {
      claims.push_back({.weight = 1, .demand = std::max<int64_t>(1, x.demand)});
    }
    absl::StatusOr<std::vector<int64_t>> split = water_fill(global, claims);
    if (!split.ok()) return split.status();
    target = (*split)[self];
  } else {
    const int64_t nodes = static_cast<int64_t>(n);
    target =
        global / nodes + (static_cast<int64_t>(self) < global % nodes ? 1 : 0);
  }

  // 5. The occupancy cap.
  int64_t reserved = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i != self) reserved += heartbeat_reserve(table[i], o.handoff);
  }
  HeartbeatNode& me = table[self];
  const int64_t share =
      std::max<int64_t>(0, std::min(target, global - reserved));

  // 6. A changed share is a new generation, and so is a fresh row's first
  // grant: the node may hold a share granted by a table since lost (it
  // reports that grant's generation), and must apply this one even when
  // it equals the row's initial 0.
  if (fresh || share != me.share) {
    me.share = share;
    ++me.generation;
    if (me.generation > r.applied_gen) {
      me.max_unacked = std::max(me.max_unacked, share);
    }
  }
  return HeartbeatGrant{me.share,         me.generation,
                        global,           static_cast<int64_t>(n),
                        me.expires_at_ms,
                        /*stale=*/false};
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_HEARTBEAT_CORE_H_
