// throttlekit/throttlekit.h
//
// The umbrella header for the in-process library: every header under core/
// (decisions and their combine algebra, the `RateEngine` concept, clocks,
// keys, costs), strategy/ (every strategy, the leaky-bucket shaper, the
// token budget), store/ (the memory store, `RateLimiter`, the single-key
// cells, the lock-free sliding-log ring) and concurrency/ (adaptive
// concurrency and its control laws); internal helpers come in through them.
//
// Not included (include them directly): coordinator/ (the `Coordinator`,
// `MemoryCoordinator`, `StrictRateLimiter`, fail policy), twotier/ (the
// cached-deny, leased and two-tier engines, the lease spender and sizers,
// weighted-fair escrow), observe/ (HTTP rate-limit headers, metric names,
// the decision observer), admission/ (unified admission), and the Redis and
// Postgres backends (redis/, postgres/; their own CMake targets).

#ifndef THROTTLEKIT_THROTTLEKIT_H_
#define THROTTLEKIT_THROTTLEKIT_H_

#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/concurrency/aimd.h"
#include "throttlekit/concurrency/gradient2.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/concurrency/windowed_min.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/store/cell.h"
#include "throttlekit/store/gcra_cell.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/store/sliding_log_ring.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/leaky_bucket.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

#endif  // THROTTLEKIT_THROTTLEKIT_H_
