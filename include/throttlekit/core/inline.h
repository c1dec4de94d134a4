// throttlekit/core/inline.h
//
// Provides THROTTLEKIT_ALWAYS_INLINE, for the few small functions on the
// check path that the compiler would otherwise leave out of line (a strategy
// step called once per check), and THROTTLEKIT_NOINLINE, for the rare slow
// path of an inlined check (kept out so the fast path stays small).
// Measured in bench/rate_limiter_benchmark.cc and
// bench/lease_spender_benchmark.cc.

#ifndef THROTTLEKIT_CORE_INLINE_H_
#define THROTTLEKIT_CORE_INLINE_H_

#if defined(__GNUC__) || defined(__clang__)
#define THROTTLEKIT_ALWAYS_INLINE inline __attribute__((always_inline))
#define THROTTLEKIT_NOINLINE __attribute__((noinline))
#else
#define THROTTLEKIT_ALWAYS_INLINE inline
#define THROTTLEKIT_NOINLINE
#endif

#endif  // THROTTLEKIT_CORE_INLINE_H_
