// sim/admission_fleet.h
//
// Provides the unified-admission scenario of the fleet simulator
// (docs/simulation.md): N nodes, each running the production
// `BasicUnifiedAdmission` (admission/unified_admission.h) on its own clock
// with three axes: a fixed concurrency ceiling, a rate axis and a cost axis,
// both production window-coupled `BasicLeasedLimiter`s leasing from one
// coordinator across the simulated network. Requests of cost 1 to
// `max_cost` arrive as Poisson streams with a hot key; an admitted request
// holds its slot for an exponential service time and then releases it.
// The leased fleet's faults apply (sim/windowed_fleet.h); a crash loses the
// node's memory, its slots with it.
//
// The invariants, checked at every admission:
// - rate: per key and window of the store's clock, the rate axis's allowed
//   decisions (a request the cost axis then denied included: the rate axis
//   counted it) are at most `limit`;
// - cost: per key and window, the units the cost axis allowed are at most
//   `cost_budget`;
// - concurrency: a node's admitted requests in service are at most
//   `max_inflight` at every instant.
// Each axis's decision counts in the window of the credits it spent (its
// `reset_at` less one window), unless the node asked after that window
// ended (then in the window it asked in): credits are never spent before
// they are granted, and a spend after their window is a violation.
// And once the run has drained: no live node's concurrency axis still
// counts a slot (no permit leak: a refused or failed admission gave its
// slot back, and every released request returned its own).
//
// A run is a pure function of (seed, config).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_ADMISSION_FLEET_H_
#define THROTTLEKIT_SIM_ADMISSION_FLEET_H_

#include <cstdint>
#include <string>

#include "sim/leased_fleet.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct AdmissionFleetConfig {
  // The fleet: nodes, keys, the rate axis's limit per window and batch,
  // demand, duration, network and faults; `window_coupled` false is the
  // mutation (both leased axes carry credits past their window).
  LeasedFleetConfig fleet;
  int64_t cost_budget = 1000;  // the cost axis's units per key per window
  int64_t max_cost = 8;        // request costs drawn in 1 .. max_cost
  int64_t max_inflight = 16;   // the concurrency ceiling, per node
  double mean_service_ms = 5;  // exponential, capped at 20 ms
};

// Draws a run's budgets, costs, ceiling, network and fault kinds from
// `seed` (swarm testing), for `nodes` nodes.
AdmissionFleetConfig swarm_admission_config(uint64_t seed, int nodes);

SimResult run_admission_fleet(uint64_t seed, const AdmissionFleetConfig& config,
                              bool keep_trace = false);

// The command line that reproduces a run of tk_sim (sim/tk_sim.cc).
std::string admission_replay_command(uint64_t seed,
                                     const AdmissionFleetConfig& config);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_ADMISSION_FLEET_H_
