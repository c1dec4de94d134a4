// throttlekit/core/ttl_slack.h
//
// Provides `kDefaultTtlSlackMs`: how long every store keeps a key's state
// past its expiry by default (the `ttl_slack_ms` of `MemoryStoreOptions`,
// `MemoryCoordinatorOptions`, `RedisCoordinatorOptions`,
// `RedisRegionPoolOptions` and `PostgresCoordinatorOptions`), so that a
// stale `now` never revives a window (docs/semantics.md, "A stale now").
//
// A call that passes its own `now` (`check_at`, `check_many`, `admit_at`, a
// coordinator call with a non-zero `now`) reads it before it reaches the
// store: a scheduling delay, a queue, a pipeline or a request-scoped clock
// make it stale by the time the step runs. A stale `now` that still finds
// its key's state is decided at the latest instant the state has seen, so a
// window never counts more than its limit. One that finds the state gone
// (dropped at its expiry by the store's own clock: Redis's physical TTL,
// Postgres's `sweep()`, or by a fresher caller's `now` in memory) would
// decide its ended window as cold and count it again from zero.
//
// The slack closes that gap for every `now` at most `ttl_slack_ms` behind
// the store: state is dropped only once it has been expired for the whole
// slack. The default, 60 s, covers any scheduling delay, connection wait or
// queue a request can meet before its deadline (every command deadline of
// the library is at most 10 min, but a caller whose `now` is older than a
// minute has given up on it); a caller with a `now` staler than that (a
// replay of old traffic) sets a larger slack. Rate decisions never depend
// on the slack for a `now` that is not stale: a state past its expiry
// decides exactly as a cold key (the strategies' `expires_at_ms` contract).
//
// What it costs: a key idle since its window ended is held the slack
// longer. Keys in steady use cost nothing more (one key per limited key,
// whatever the slack). docs/semantics.md, "A stale now", gives the bytes a
// key costs on each store, measured at 10^6 keys.
//
// Thread-safety: a constant.

#ifndef THROTTLEKIT_CORE_TTL_SLACK_H_
#define THROTTLEKIT_CORE_TTL_SLACK_H_

#include <cstdint>

namespace throttlekit {

inline constexpr int64_t kDefaultTtlSlackMs = 60'000;

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_TTL_SLACK_H_
