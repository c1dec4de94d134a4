// sim/fair_fleet.h
//
// Provides the federated weighted-fair escrow fleet of the fleet simulator
// (docs/simulation.md): K regions (nodes), each running one production
// `BasicFederatedFairEscrow` (federation/federated_fair_escrow.h) on its
// own clock for its own tenants, share one global budget of `limit`
// credits per window through one region pool (the production
// `MemoryRegionPool`, on the store's clock). A pool call is modelled as
// atomic at the pool at the instant of the call, failing at once
// (kUnavailable) when the region is cut off or the message is lost: the
// escrow calls its pool synchronously. The workload and faults are the
// leased fleet's (sim/windowed_fleet.h): Poisson arrivals with a hot
// tenant (the fleet's key 0 is each region's first tenant), message loss,
// partitions, crashes that lose an escrow's memory, clocks ahead.
//
// Invariants:
// - the budget, at every admission: at most `limit` admitted per pool
//   window across every region and tenant (admissions count in the window
//   that paid for them: the decision's `reset_at` is its end);
// - the fairness band (the header's residual bound under its assumptions
//   A1-A5): for each tenant i in each judged window, with `d_i` its
//   calls, `s_i` its share of `limit` in one fleet-wide weighted-fair
//   escrow and K the regions,
//       min(d_i, s_i) - 2 <= admitted_i <= min(d_i, s_i + K + 1).
//   A window is judged when the seed has no message loss and no clock
//   skew, every fault had healed by the window before it (A2: every
//   tenant active in both), every tenant called in both, the window lies
//   inside the arrivals, and A5 holds in it: `u + q + 3 <= min s_i`, with
//   `u` what the fleet admitted before the last region's first pool
//   request of the window and `q` the quantum. (A1: each tenant belongs to
//   one region; A3: unit costs; A4: no hard caps, by construction.)
//
// `greedy_region` is the mutation: region 0 tells the pool twice its
// weight (a region that miscounts its active tenants). The budget still
// holds; the band must catch the unfair split.
//
// A run is a pure function of (seed, config).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_FAIR_FLEET_H_
#define THROTTLEKIT_SIM_FAIR_FLEET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/leased_fleet.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct FairFleetConfig {
  // The fleet: regions (`nodes`), tenants per region (`keys`), the global
  // limit per window, demand, duration, network and faults. Its `batch`,
  // `window_coupled`, `timeout_ms` and `fail_mode` are unused.
  LeasedFleetConfig fleet;
  // Credits an escrow asks beyond a call's need.
  int64_t quantum = 4;
  // Tenant k of region r weighs 1 + (weight_seed + 3r + 7k) % 5.
  uint64_t weight_seed = 0;
  // The mutation (see the top).
  bool greedy_region = false;
};

// Tenant `k` of region `r`'s weight under `config`.
int64_t fair_tenant_weight(const FairFleetConfig& config, int r, int k);

// Draws a run's fleet, weights, quantum, network and fault kinds from
// `seed` (swarm testing), for `nodes` regions.
FairFleetConfig swarm_fair_config(uint64_t seed, int nodes);

SimResult run_fair_fleet(uint64_t seed, const FairFleetConfig& config,
                         bool keep_trace = false);

// The command line that reproduces a run of tk_sim (sim/tk_sim.cc).
std::string fair_replay_command(uint64_t seed, const FairFleetConfig& config);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_FAIR_FLEET_H_
