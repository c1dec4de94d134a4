// sim/concurrency_fleet.h
//
// Provides the distributed-concurrency scenario of the fleet simulator
// (docs/simulation.md): N nodes, each running the production
// `BasicDistributedConcurrency` (concurrency/distributed_concurrency.h) on
// its own clock, beat to one coordinator (`SimCoordinator`: the production
// heartbeat step of the memory coordinator) on a scheduler the loop drives,
// and serve Poisson arrivals, each holding its slot for a service time.
// Faults are drawn per seed: message loss, partitions that heal, crashes
// (the node's slots die with it; it restarts under a new id), and clock
// drift within the self-fencing margin.
//
// The invariant, checked at every acquisition: with acknowledged handoff,
// self-fencing and fail-closed outages, the slots held across the fleet
// never exceed the global limit at any instant (docs/
// distributed_concurrency.md). Every node's local limit is fixed (min =
// max = initial), so the global limit is that number.
//
// Beats are the scheduler's waited beats, modelled as atomic at the
// coordinator at the instant of the call (a lost one fails at once); the
// lag the handoff guards against is the other nodes' reports, one beat
// old. A run is a pure function of (seed, config).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_CONCURRENCY_FLEET_H_
#define THROTTLEKIT_SIM_CONCURRENCY_FLEET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/network.h"
#include "sim/world.h"

namespace throttlekit::sim {

struct ConcurrencyFleetConfig {
  int nodes = 5;
  int64_t local_limit = 12;  // every node's: the global limit
  int64_t heartbeat_ms = 25;
  int64_t lease_ttl_ms = 250;
  int64_t fence_margin_ms = 50;
  double arrivals_per_sec_per_node = 2000;
  double mean_service_ms = 4;  // exponential, capped at max_service_ms
  double max_service_ms = 20;  // below the fence margin (work that is
                               // not cancelled must end before it)
  int64_t duration_ms = 3000;
  NetworkOptions network;
  bool partitions = false;  // a node cut off for up to 3 leases, healed
  bool crashes = false;     // a node dies (its slots with it), restarts
  int64_t drift_ppm = 0;    // each node's clock: -drift .. +drift ppm
  // Mutations the proofs call unsafe for the bound checked.
  bool handoff = true;
  bool self_fencing = true;
  // The permit-leak check's own teeth: the first admitted request never
  // releases its permit (a handler that forgets to), and the run must say
  // so.
  bool drop_a_release = false;
};

ConcurrencyFleetConfig swarm_concurrency_config(uint64_t seed, int nodes);

// `SimResult` as the leased fleet's: `worst_window` is the most slots held
// at once across the fleet, `violations` the acquisitions that took the
// sum above the limit, `admitted` the acquisitions. Also checked, once the
// arrivals have ended and every request admitted before has finished (the
// longest service time later): no live node's limiter still counts a
// slot (no permit leak).
SimResult run_concurrency_fleet(uint64_t seed,
                                const ConcurrencyFleetConfig& config,
                                bool keep_trace = false);

std::string concurrency_replay_command(uint64_t seed,
                                       const ConcurrencyFleetConfig& config);

// A smaller configuration on which `seed` still breaks the ceiling
// (sim/shrink.h): turns each fault off, takes the drift out, and halves
// the fleet (keeping its demand, at least 2 nodes: a handoff needs two)
// and the run (at least 4 leases) while it still fails, at most `rounds`
// passes. `failing` must fail.
ConcurrencyFleetConfig shrink_concurrency(uint64_t seed,
                                          ConcurrencyFleetConfig failing,
                                          int rounds = 8);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_CONCURRENCY_FLEET_H_
