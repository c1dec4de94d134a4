// sim/rlqs_fleet.h
//
// Provides the quota door's fleet scenario of the fleet simulator
// (docs/simulation.md, "The rlqs fleet"; docs/rlqs.md, "The fleet" and
// "The bound"): many Envoys (clients) each holding a bucket of one or two
// budgets, several throttlekit-servers splitting each budget, and the
// store between the servers.
//
// - Servers run the production transition code: per budget one
//   `QuotaBudget` (src/server/quota_budget.h) and one `ShareLease`
//   (src/server/share_lease.h), beating to the store as `HeartbeatShare`
//   does (one beat in flight per budget, every heartbeat, the first at the
//   budget's creation; one sequence over the node's keys; the report
//   {applied generation, then committed(now), demand()}; handoff,
//   demand-proportional, aggregate min, lease = ttl + slack + max(3
//   heartbeats, 2 s) + the fence margin; a new node id per incarnation)
//   through `SimCoordinator` (the production heartbeat step of the memory
//   coordinator, on the store's clock). Reports are handled as the quota
//   door does: every usage of a message reported (or its bucket
//   abandoned, when reported idle for abandonIdle), then each budget it
//   touched assigned once; the pusher assigns a budget when it comes due
//   or its share moves (woken by a beat that moves it, and by a report, a
//   closed stream or an abandon that makes a budget due before it meant
//   to look) and drops a budget once idle (its beats stop; a report makes
//   a new one); nothing is assigned before the first answered beat. Each
//   server has its own clock (an offset and a drift).
// - Clients behave as Envoy's filter does (tests/server/rlqs_emulator.h),
//   on the store's clock: a report every period of every bucket they hold
//   (whole-second `time_elapsed`) and an immediate one at a bucket's first
//   request; token buckets refilled continuously, a first one full, an
//   identical one keeping the running bucket, a changed one keeping the
//   fill ratio, dropped at their TTL from arrival; DENY_ALL while without
//   an assignment (the bound's assumption A4); an abandoned bucket erased,
//   made again at its next request. Requests arrive as Poisson processes
//   whose rates shift during the run, on some seeds on and off.
// - The network: responses and reports on a stream take up to
//   `stream_delay_us` (FIFO per stream); responses may be lost; streams
//   break (the client reopens on its next report tick, to another server;
//   the server forgets the stream's clients a little later); servers crash
//   (their memory, streams and beats lost) and restart as new incarnations;
//   servers are cut off from the store; the store's messages are delayed,
//   reordered and lost as in the other fleets.
//
// Checked: at every assignment, the commitments of every server (crashed
// incarnations' included, on their clocks) sum to at most R, per budget
// (assumption A3, the invariant the bound rests on); at every response a
// client applies, the token buckets installed across the clients sum to
// at most R; after the run, for I in {F, L, 2L, 5L} (L = ttl + slack), the
// admissions of every window of length I are at most
// R*I/F + R + R*(floor(I/L) + 1).
//
// Assumptions the run keeps: a stream's messages arrive within
// `stream_delay_us`, which the swarm draws at most the delivery slack less
// 2 ms and the drift of a server clock over L (A1 on the server's clock,
// whose milliseconds are whole); server clocks drift at most the fence
// margin over a lease (the margin is 100 ms, the drift at most 500 ppm).
//
// A run is a pure function of (seed, config).
//
// The fleet's pieces: sim/rlqs_server.h (a server), sim/rlqs_client.h (an
// Envoy), sim/rlqs_stream.h (the messages between them), sim/rlqs_checks.h
// (the checks); rlqs_fleet.cc runs them (the network, the workload, the
// faults), rlqs_swarm.cc draws, replays and shrinks configurations.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_RLQS_FLEET_H_
#define THROTTLEKIT_SIM_RLQS_FLEET_H_

#include <cstdint>
#include <string>

#include "sim/network.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct RlqsFleetConfig {
  int servers = 3;
  int clients = 20;
  // 1 or 2 budgets; every client has a bucket in each. Budget 0 has R =
  // `limit` tokens per fill interval, budget 1 a third of it (at least 1).
  int budgets = 1;
  int64_t limit = 60;
  int64_t fill_interval_s = 1;  // F
  int64_t ttl_s = 2;            // the assignments' TTL; slack min(1 s, ttl/4)
  int64_t heartbeat_ms = 1000;  // fleetHeartbeat
  int64_t fence_margin_ms = 100;
  int64_t report_period_ms = 5000;  // Envoy's report timer
  // The clients' demand, as a multiple of each budget's R per F, and how
  // many times during the run it shifts (a new multiple, new weights).
  double demand = 1.5;
  int shifts = 2;
  // On/off demand: each bucket's requests stop and start again after
  // exponential times of this mean, ms; 0: always on.
  int64_t onoff_ms = 0;
  bool onoff_together = false;  // every bucket of the fleet at once
  // The door's abandonIdle: a bucket reported with no requests this long
  // is abandoned; 0: never.
  int64_t abandon_idle_ms = 60'000;
  int64_t duration_ms = 30'000;
  NetworkOptions network;  // between the servers and the store
  // A stream's one-way delay is uniform in [0, stream_delay_us].
  int64_t stream_delay_us = 200'000;
  double reply_loss = 0;      // a response lost (without a break)
  double breaks_per_min = 0;  // stream breaks across the fleet
  bool partitions = false;    // servers cut off from the store, healed
  bool crashes = false;       // servers crash and restart
  int64_t drift_ppm = 0;      // each server clock: -drift .. +drift ppm
  // Mutations the proofs call unsafe for the bound checked.
  // false: each beat reports the share the server applied as its inflight
  // instead of its commitments, so the store stops reserving a lowered
  // share's assignments before their time to live ends.
  bool ttl_accounting = true;
  bool self_fencing = true;  // false: ShareLease's fence ignored
  bool handoff = true;       // false: the beats' handoff option off
  // The bound's assumption A4 broken (the window check's own teeth):
  // clients let requests through while they hold no assignment, as
  // Envoy's default no_assignment_behavior (ALLOW_ALL) does.
  bool allow_without_assignment = false;
};

// Draws a run from `seed` (swarm testing: each seed turns some faults on)
// for a fleet of `servers`.
RlqsFleetConfig swarm_rlqs_config(uint64_t seed, int servers);

// R of budget `b` (see `RlqsFleetConfig::budgets`).
int64_t rlqs_budget_limit(const RlqsFleetConfig& config, int b);
// The assignments' delivery slack, min(1 s, ttl/4), ms.
int64_t rlqs_slack_ms(const RlqsFleetConfig& config);
// L = ttl + slack, ms.
int64_t rlqs_commit_ms(const RlqsFleetConfig& config);

// `SimResult` as the other fleets': `admitted` and `requests` the
// clients' requests, `worst_window` the most admissions of one budget in a
// window of F, `violations` the checks that failed (the commitments, the
// installed buckets, the admissions bound); `crashes` and the store's
// `messages_lost` and `timeouts` as theirs; the rlqs figures in `rlqs`.
SimResult run_rlqs_fleet(uint64_t seed, const RlqsFleetConfig& config,
                         bool keep_trace = false);

std::string rlqs_replay_command(uint64_t seed, const RlqsFleetConfig& config);

// A smaller configuration on which `seed` still fails (sim/shrink.h):
// turns each fault off, calms the network, halves the clients (keeping
// their demand), the servers (at least 2) and the run (at least 6 L).
// `failing` must fail.
RlqsFleetConfig shrink_rlqs(uint64_t seed, RlqsFleetConfig failing,
                            int rounds = 8);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_RLQS_FLEET_H_
