// tests/support/call_outcomes.h
//
// Provides `CallOutcomes`: a tally, safe to share between threads, of the
// statuses a store's calls return while the server is slow or gone. A call
// is answered (ok), meets an outage (kDeadlineExceeded or kUnavailable: the
// contract for a server that is frozen, killed or too slow for the
// deadline), or is something else: a bug the tests expect none of.

#ifndef THROTTLEKIT_TESTS_SUPPORT_CALL_OUTCOMES_H_
#define THROTTLEKIT_TESTS_SUPPORT_CALL_OUTCOMES_H_

#include <atomic>

#include "absl/status/status.h"

namespace throttlekit::testing {

struct CallOutcomes {
  std::atomic<int> ok{0}, outage{0}, other{0};

  // Counts `s`; false when it is neither an answer nor an outage.
  bool count(const absl::Status& s) {
    if (s.ok()) {
      ok.fetch_add(1);
    } else if (absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) {
      outage.fetch_add(1);
    } else {
      other.fetch_add(1);
      return false;
    }
    return true;
  }
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CALL_OUTCOMES_H_
