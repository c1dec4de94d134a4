// sim/leased_fleet.h
//
// Provides the leased-fleet scenario of the fleet simulator
// (docs/simulation.md): N nodes, each running the production
// `BasicLeasedLimiter` (twotier/leased_limiter.h) on its own clock, lease
// from one coordinator (`SimCoordinator`) across the simulated network,
// under a Poisson workload with a hot key, and faults drawn per seed
// (swarm testing): message loss, wide delays that reorder messages,
// partitions that heal, node crashes that lose the node's memory (and
// restart it empty), and node clocks ahead of the store's with drift.
//
// The invariant, checked at every admission: with window coupling on,
// admissions of each key per window of the store's clock are at most
// `limit` (docs/semantics.md, "Leasing and the fleet"), each admission in
// the window of its decision: a local hit when the node spends, a miss
// served from a lease when the coordinator granted it (as a strict check
// is decided when the store runs it; its answer reaches the caller a
// network delay later, possibly in the next window). Node clocks run
// ahead of the store's, never behind: a node behind spends a rolled
// window's credits for the length of its lag (documented in
// twotier/leased_limiter.h), which this bound does not cover.
//
// Also judged: the fail policy (sim/windowed_fleet.h): each outage the
// policy decided is its decision, fail-open admissions stand outside the
// bound, and every request is answered exactly once.
//
// A run is a pure function of (seed, config): `run_leased_fleet` twice
// gives the same trace, byte for byte.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_LEASED_FLEET_H_
#define THROTTLEKIT_SIM_LEASED_FLEET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/network.h"
#include "sim/windowed_fleet.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct LeasedFleetConfig {
  int nodes = 8;
  int keys = 4;  // key 0 takes half of all requests
  int64_t limit = 200;
  int64_t window_ms = 100;
  int64_t batch = 16;
  // The mutation the proofs call unsafe for the bound checked: credits
  // carried past their window (the bound is then limit + N * (batch - 1)).
  bool window_coupled = true;
  double requests_per_sec_per_node = 1000;
  int64_t duration_ms = 1000;
  NetworkOptions network;
  // Faults (drawn per seed by `swarm_config`).
  bool partitions = false;  // a few nodes cut off for up to 300 ms
  bool crashes = false;     // a few nodes lose their memory and restart
  bool clock_skew = false;  // node clocks ahead by up to 50 ms, drifting
  int64_t timeout_ms = 50;  // the coordinator's deadline per call
  // How requests arrive (sim/windowed_fleet.h); not drawn by the swarm:
  // tk_sim's --bursts and --diurnal choose it.
  Workload workload = Workload::kPoisson;
  // One store failover with a replication lag (sim/windowed_fleet.h); not
  // drawn by the swarm: tk_sim's --failover turns it on.
  bool store_failover = false;
  // A coordinator restart that loses all its state (a Redis without
  // persistence restarting), once, at a drawn instant: a failover to a
  // replica that never received a write. Not drawn: tk_sim's --restart.
  bool store_restart = false;
  // What the nodes do when the store cannot answer (fail_policy.h;
  // fail-closed with a retry of one window), judged at every answer
  // (sim/windowed_fleet.h). Drawn per seed for the leased and strict
  // fleets; the federated and admission fleets keep kPropagate.
  FailPolicy::Mode fail_mode = FailPolicy::kPropagate;
  // The fail policy's mutation: the engines are built without it (as a
  // wrapper that forgets to pass the configured policy on), while the
  // checker judges the configured one.
  bool policy_dropped = false;
};

// Draws the fault kinds and the network of a run from `seed` (swarm
// testing: each seed turns some faults on), for a fleet of `nodes`.
LeasedFleetConfig swarm_config(uint64_t seed, int nodes);

// The run's shape (sim/windowed_fleet.h): the fleet, its demand and its
// faults; with `clock_skew`, node clocks ahead by up to 50 ms.
WindowedFleetShape windowed_shape(const LeasedFleetConfig& config);

SimResult run_leased_fleet(uint64_t seed, const LeasedFleetConfig& config,
                           bool keep_trace = false);

// The command line that reproduces a run of tk_sim (sim/tk_sim.cc):
// `tk_sim <scenario>` and the leased fleet's flags; the scenarios built on
// this configuration (federated, admission) append their own.
std::string replay_command(uint64_t seed, const LeasedFleetConfig& config,
                           std::string_view scenario = "leased");

// A smaller configuration that still violates the bound with `seed`:
// greedily turns each fault off, calms the network, and halves the fleet,
// the keys and the duration while the run still fails (at most `rounds`
// passes). `failing` must fail.
LeasedFleetConfig shrink(uint64_t seed, LeasedFleetConfig failing,
                         int rounds = 8);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_LEASED_FLEET_H_
