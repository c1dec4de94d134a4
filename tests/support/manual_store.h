// tests/support/manual_store.h
//
// A `MemoryCoordinator` on a `ManualClock` the test moves: the store of the
// two-tier tests. The clock starts at `kManualEpoch`, a window start for
// every window length dividing 1000 ms.

#ifndef THROTTLEKIT_TESTS_SUPPORT_MANUAL_STORE_H_
#define THROTTLEKIT_TESTS_SUPPORT_MANUAL_STORE_H_

#include <cstdint>
#include <memory>

#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::testing {

inline constexpr int64_t kManualEpoch = kEpoch;
using ManualClockRef = ClockRef<ManualClock>;

struct ManualStore {
  ManualClock clock{kManualEpoch};
  std::shared_ptr<MemoryCoordinator> store = *MemoryCoordinator::create(
      {},
      std::make_shared<ClockAdapter<ManualClockRef>>(ManualClockRef(clock)));
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_MANUAL_STORE_H_
