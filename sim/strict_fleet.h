// sim/strict_fleet.h
//
// Provides the strict-fleet scenario of the fleet simulator
// (docs/simulation.md): N nodes, each running the production
// `StrictRateLimiter` (coordinator/strict_rate_limiter.h) over a fixed
// window, send every check across the simulated network to one store
// (`SimCoordinator`, whose keys expire on the store's clock as Redis's
// do). The workload and faults are the leased fleet's
// (sim/windowed_fleet.h): Poisson arrivals with a hot key, message loss,
// wide delays that reorder, partitions, crashes, node clocks ahead of the
// store's.
//
// The invariant, checked at every admission: admitted per key per window
// <= limit, each admission in the window its decision names (the store
// decides it on the window of the `now` it runs the step at). Nodes ask
// without a `now` (`check_async`), so the store's clock decides, as
// `StrictRateLimiter::check` does. `stale_now` is the mutation: each node
// names the `now` its clock read when the request arrived
// (`check_at_async`), and a check that reaches the store after its
// window's key expired counts that ended window afresh (a stale-`now`
// re-grant: the store hands out an ended window's limit a second time).
//
// `cached_deny` runs the two-tier cached-deny mode instead
// (`CachedDenyLimiter`, twotier/cached_deny_limiter.h): the store decides
// as in strict mode, and each node answers a key it was refused on from
// its own memory for the refusal's retry hint, counted on the node's
// clock. Checked besides the bound: a cached denial comes only while the
// store's window that refused it lasts (to the clock's millisecond: at a
// store time at most that refusal's `reset_at`); the header's promise
// that clock offsets do not stretch a denial. `slow_clocks` is that
// row's mutation: node clocks at half speed, which stretch every
// remembered denial to twice its hint.
//
// Both modes judge the fail policy (drawn per seed: propagate, open,
// closed; sim/windowed_fleet.h) and that every request is answered within
// the store's deadline.
//
// A run is a pure function of (seed, config).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_STRICT_FLEET_H_
#define THROTTLEKIT_SIM_STRICT_FLEET_H_

#include <cstdint>
#include <string>

#include "sim/leased_fleet.h"
#include "sim/world.h"
#include "throttlekit/core/ttl_slack.h"

namespace throttlekit::sim {

struct StrictFleetConfig {
  // The fleet: nodes, keys, the limit per window, demand, duration,
  // network and faults. Its `batch` and `window_coupled` are unused (no
  // leases).
  LeasedFleetConfig fleet;
  // Nodes name their own clock's `now` at arrival. The mutation with
  // `store_ttl_slack_ms` 0 (as `tk_sim strict --stale-now` runs it); on
  // the default slack, a stale `now` revives nothing.
  bool stale_now = false;
  // How long the store keeps a state past its expiry (core/ttl_slack.h).
  int64_t store_ttl_slack_ms = kDefaultTtlSlackMs;
  // The nodes run the cached-deny mode (see the top).
  bool cached_deny = false;
  // Its mutation: node clocks at half speed (no offset, no other drift).
  bool slow_clocks = false;
};

// Draws a run's network and fault kinds from `seed` (swarm testing), for
// `nodes` nodes.
StrictFleetConfig swarm_strict_config(uint64_t seed, int nodes);

SimResult run_strict_fleet(uint64_t seed, const StrictFleetConfig& config,
                           bool keep_trace = false);

// The command line that reproduces a run of tk_sim (sim/tk_sim.cc).
std::string strict_replay_command(uint64_t seed,
                                  const StrictFleetConfig& config);

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_STRICT_FLEET_H_
