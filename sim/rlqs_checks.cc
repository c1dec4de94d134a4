// sim/rlqs_checks.cc: the rlqs fleet's checks (see the header).

#include "sim/rlqs_checks.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace throttlekit::sim::rlqs_internal {

Checks::Checks(std::vector<int64_t> limits, int64_t fill_interval_s,
               int64_t commit_ms)
    : limits_(std::move(limits)),
      fill_interval_s_(fill_interval_s),
      commit_ms_(commit_ms),
      admissions_(limits_.size()) {}

void Checks::commitments(int b, int64_t sum, int by, int64_t now_us,
                         SimResult& r) const {
  const int64_t r_b = limit(b);
  ++r.rlqs.commitment_checks;
  r.rlqs.most_committed = std::max(r.rlqs.most_committed, sum * 100 / r_b);
  if (sum > r_b) {
    ++r.rlqs.over_committed;
    record_violation(
        r, absl::StrCat("budget ", b, ": the servers' commitments sum to ", sum,
                        " > R = ", r_b, " at ", now_us, " us (server ", by,
                        " assigned)"));
  }
}

void Checks::held(int b, int64_t sum, int by, int64_t now_us,
                  SimResult& r) const {
  const int64_t r_b = limit(b);
  if (sum > r_b) {
    ++r.rlqs.over_held;
    record_violation(
        r, absl::StrCat("budget ", b, ": the clients hold buckets of ", sum,
                        " tokens > R = ", r_b, " at ", now_us, " us (client ",
                        by, " applied)"));
  }
}

void Checks::windows(SimResult& r) const {
  const int64_t f_us = fill_interval_s_ * 1'000'000;
  const int64_t l_us = commit_ms_ * 1000;
  for (size_t b = 0; b < admissions_.size(); ++b) {
    const std::vector<int64_t>& times = admissions_[b];
    const int64_t r_b = limits_[b];
    for (const int64_t i_us : {f_us, l_us, 2 * l_us, 5 * l_us}) {
      // bound * F, in integers: R*I + F*(R + R*(floor(I/L) + 1)).
      const int64_t bound_f =
          r_b * i_us + f_us * (r_b + r_b * (i_us / l_us + 1));
      int64_t most = 0;
      int64_t most_from = 0;
      size_t first = 0;
      for (size_t last = 0; last < times.size(); ++last) {
        while (times[last] - times[first] > i_us) ++first;
        const auto n = static_cast<int64_t>(last - first + 1);
        if (n > most) {
          most = n;
          most_from = times[first];
        }
      }
      if (i_us == f_us) r.worst_window = std::max(r.worst_window, most);
      r.rlqs.closest_to_bound =
          std::max(r.rlqs.closest_to_bound, static_cast<double>(most * f_us) /
                                                static_cast<double>(bound_f));
      if (most * f_us > bound_f) {
        ++r.rlqs.over_bound;
        record_violation(
            r, absl::StrCat("budget ", b, ": ", most,
                            " admissions in a window of ", i_us / 1000,
                            " ms from ", most_from, " us > the bound ",
                            exact(static_cast<double>(bound_f) /
                                  static_cast<double>(f_us))));
      }
    }
  }
}

}  // namespace throttlekit::sim::rlqs_internal
