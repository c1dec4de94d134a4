// sim/rlqs_checks.h
//
// Provides `Checks`: the rlqs fleet's checks (sim/rlqs_fleet.h, "Checked";
// docs/simulation.md, "The checks"), per budget of R tokens per fill
// interval F, with L = ttl + slack:
//
// - the commitments (assumption A3, the invariant the bound rests on): at
//   every assignment, the commitments of every server, crashed
//   incarnations' included, each on its own clock, sum to at most R;
// - the buckets held: whenever a client applies a response, the token
//   buckets installed across the clients sum to at most R;
// - the bound: after the run, for I in {F, L, 2L, 5L}, the admissions of
//   every window [t, t + I] of the store's time are at most
//   R*I/F + R + R*(floor(I/L) + 1).
//
// The fleet gathers the sums (it holds the servers and the clients) and
// records each admission; the checks judge them, count them in the run's
// `SimResult` and record each failure as a violation, its text naming the
// budget, the sums and the instant.
//
// A piece of the rlqs fleet (namespace `rlqs_internal`), not an interface
// of the simulator.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_RLQS_CHECKS_H_
#define THROTTLEKIT_SIM_RLQS_CHECKS_H_

#include <cstdint>
#include <vector>

#include "sim/world.h"

namespace throttlekit::sim::rlqs_internal {

class Checks {
 public:
  // `limits`: R of each budget; F in s; L in ms.
  Checks(std::vector<int64_t> limits, int64_t fill_interval_s,
         int64_t commit_ms);

  // R of budget `b`.
  int64_t limit(int b) const { return limits_[static_cast<size_t>(b)]; }

  // An admission of budget `b` at `now_us` (true us; in order of time).
  void admitted(int b, int64_t now_us) {
    admissions_[static_cast<size_t>(b)].push_back(now_us);
  }

  // `sum`: the commitments to budget `b` at `now_us`, just after server
  // `by` assigned it. They rise only at an assignment, so checking after
  // each is checking at every instant.
  void commitments(int b, int64_t sum, int by, int64_t now_us,
                   SimResult& r) const;

  // `sum`: the tokens (`max_tokens`) of the unexpired token buckets the
  // clients hold for budget `b` at `now_us`, just after client `by`
  // applied a response. Each is one of its server's unexpired records, by
  // A1.
  void held(int b, int64_t sum, int by, int64_t now_us, SimResult& r) const;

  // The bound over the admissions recorded, every window length and
  // budget; sets `r.worst_window` (the most admissions of one budget in a
  // window of F) and `r.rlqs.closest_to_bound`.
  void windows(SimResult& r) const;

 private:
  const std::vector<int64_t> limits_;
  const int64_t fill_interval_s_;
  const int64_t commit_ms_;
  std::vector<std::vector<int64_t>> admissions_;  // per budget, true us
};

}  // namespace throttlekit::sim::rlqs_internal

#endif  // THROTTLEKIT_SIM_RLQS_CHECKS_H_
