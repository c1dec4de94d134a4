// sim/federated_fleet.h
//
// Provides the federated-fleet scenario of the fleet simulator
// (docs/simulation.md): processes in several regions, each running the
// production `BasicFederatedLimiter` (federation/federated_limiter.h) on
// its own clock, lease windowed credits from one global coordinator
// (`SimCoordinator`, across the simulated network) and, when the seed
// turns it on, share a regional escrow (one production `MemoryCoordinator`
// per region, on the store's clock). The escrow is in-region: its calls are
// modelled as atomic at the instant of the call, with no network between.
// The workload and faults are the leased fleet's (sim/windowed_fleet.h):
// Poisson arrivals with a hot key, message loss, wide delays that reorder,
// partitions that cut a process off from the global coordinator, crashes
// that lose a process's memory, and clocks ahead of the store's.
//
// The invariant, checked at every admission: admitted per key per window
// of the global coordinator's clock <= limit, for any number of regions and
// processes (the federation's overshoot is 0; spec/GaleFederatedLeasing.tla
// proves it for a small model), given that no process clock runs behind the
// coordinator's. `clocks_behind` breaks that stated assumption: a process
// behind by d spends a rolled window's credits for d ms, and the run must
// catch it (the mutation table's row).
//
// A run is a pure function of (seed, config).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_FEDERATED_FLEET_H_
#define THROTTLEKIT_SIM_FEDERATED_FLEET_H_

#include <cstdint>
#include <string>

#include "sim/leased_fleet.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct FederatedFleetConfig {
  // The fleet: processes (`nodes`, process n in region n % regions), keys,
  // the global limit per window, the batch per global lease, demand,
  // duration, network and faults. Its `window_coupled` is unused: a
  // federated limiter is always window-coupled.
  LeasedFleetConfig fleet;
  int regions = 3;
  // A regional escrow (L2) per region; `escrow_batch` is 4 * batch.
  bool escrow = false;
  // While the global coordinator is out, serve the region's escrow
  // (FederationOutage::kRegionalOnly; needs `escrow`).
  bool regional_only = false;
  // The assumption broken: process clocks behind the coordinator's by up
  // to 50 ms (instead of ahead, with `fleet.clock_skew`).
  bool clocks_behind = false;
};

// Draws a run's regions, escrow, outage policy, network and fault kinds
// from `seed` (swarm testing), for `nodes` processes.
FederatedFleetConfig swarm_federated_config(uint64_t seed, int nodes);

SimResult run_federated_fleet(uint64_t seed, const FederatedFleetConfig& config,
                              bool keep_trace = false);

// The command line that reproduces a run of tk_sim (sim/tk_sim.cc).
std::string federated_replay_command(uint64_t seed,
                                     const FederatedFleetConfig& config);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_FEDERATED_FLEET_H_
