/* Promela rendering of spec/GaleHeartbeatHandoff.tla: the distributed
 * concurrency coordinator with acknowledged handoff under grant and report
 * lag, for an independent check by spin (docs/formal_model.md).
 *
 * State, as in the TLA+ spec, node i of the spec at index i - 1:
 *   node side        ap, cap (the share applied), inflight, the pending
 *                    snapshot (snap_on, snap_ap, snap_inflight; zero when
 *                    none is pending) and the channel of grants issued and
 *                    not delivered: one slot per generation 1..K (the spec's
 *                    set of <<gen, share>>; a generation is issued once per
 *                    node), chan_on[g] and chan_share[g] (0 when empty);
 *   coordinator row  row_on, share, gen, acked, max_unacked, reported.
 * Each action is one d_step of one loop, so spin's states are the spec's
 * states ("states, stored" = the reachable values of these variables).
 *
 * The invariants (GlobalCap, InflightCap) are asserted at the end of every
 * step, on the state it reaches; the initial state (all zero) satisfies
 * them. A state with no enabled action (every node waiting on a report the
 * history bound disables) is a valid end state: the loop head is labelled
 * `end`.
 *
 * Constants default to spec/GaleHeartbeatHandoff.cfg (Nodes 2, L 4, K 3);
 * override with -DNODES=.. -DLIMIT=.. -DHISTORY=.. Flags:
 *   -DTIGHT          the Tight invariants (<= L - 1): must be refuted.
 *   -DDEFAULT_CAP    reserve = max(share, reported) (no handoff): InflightCap
 *                    refuted (sum(inflight) reaches 1.5 L).
 *   -DNO_UNACKED     reserve = max(acked, reported): refuted (spin's
 *                    first counterexample breaks GlobalCap, in 4 steps).
 *   -DNO_INFLIGHT    reserve = max(acked, max_unacked): refuted.
 *   -DTORN           the snapshot reads in-flight, then the generation in a
 *                    later step (SnapshotInflight, SnapshotGen): refuted.
 *                    The 'half taken' value 1 of snap_on exists only here.
 * Run by tests/model/spin_check.sh. */

#ifndef NODES
#define NODES 2
#endif
#ifndef LIMIT
#define LIMIT 4
#endif
#ifndef HISTORY
#define HISTORY 3
#endif

#if NODES < 1 || NODES > 3
#error "NODES must be in 1..3"
#endif
#if HISTORY < 1 || HISTORY > 3
#error "HISTORY must be in 1..3"
#endif
#if LIMIT < 1 || LIMIT > 60
#error "LIMIT must be in 1..60"
#endif

byte ap[NODES];
byte cap[NODES];
byte inflight[NODES];
byte snap_on[NODES];  /* 0 none; with TORN, 1 half taken; 2 pending */
byte snap_ap[NODES];
byte snap_inflight[NODES];
/* chan slot of node n, generation g: index n * HISTORY + g - 1 */
bit chan_on[NODES * HISTORY];
byte chan_share[NODES * HISTORY];
bit row_on[NODES];
byte row_share[NODES];
byte row_gen[NODES];
byte row_acked[NODES];
byte row_max_unacked[NODES];
byte row_reported[NODES];

hidden byte k;
hidden int sum_share;
hidden int sum_inflight;
hidden int g0;
hidden int target;
hidden byte fresh;

inline check_invariants() {
  sum_share = 0;
  sum_inflight = 0;
  for (k : 0 .. NODES - 1) {
    sum_share = sum_share + row_share[k];
    sum_inflight = sum_inflight + inflight[k]
  };
  assert(sum_share <= LIMIT);       /* GlobalCap */
  assert(sum_inflight <= LIMIT);    /* InflightCap */
#ifdef TIGHT
  assert(sum_share <= LIMIT - 1);
  assert(sum_inflight <= LIMIT - 1);
#endif
}

inline print_state() {
  printf(" cap=<");
  for (k : 0 .. NODES - 1) { printf(" %d", cap[k]) };
  printf(" > inflight=<");
  for (k : 0 .. NODES - 1) { printf(" %d", inflight[k]) };
  printf(" > committed=<");
  for (k : 0 .. NODES - 1) { printf(" %d", row_share[k]) };
  printf(" >\n")
}

#define ACQUIRE(n) \
  :: d_step { \
       inflight[n] < cap[n] -> \
       inflight[n]++; \
       printf("Acquire(%d):", n + 1); print_state(); check_invariants() \
     }

#define RELEASE(n) \
  :: d_step { \
       inflight[n] > 0 -> \
       inflight[n]--; \
       printf("Release(%d):", n + 1); print_state(); check_invariants() \
     }

#ifndef TORN
#define SNAPSHOT(n) \
  :: d_step { \
       snap_on[n] == 0 -> \
       snap_on[n] = 2; snap_ap[n] = ap[n]; snap_inflight[n] = inflight[n]; \
       printf("Snapshot(%d):", n + 1); print_state(); check_invariants() \
     }
#else
#define SNAPSHOT(n) \
  :: d_step { \
       snap_on[n] == 0 -> \
       snap_on[n] = 1; snap_inflight[n] = inflight[n]; \
       printf("SnapshotInflight(%d):", n + 1); print_state(); check_invariants() \
     } \
  :: d_step { \
       snap_on[n] == 1 -> \
       snap_on[n] = 2; snap_ap[n] = ap[n]; \
       printf("SnapshotGen(%d):", n + 1); print_state(); check_invariants() \
     }
#endif

/* Report(n): heartbeat_step for n's snapshot; not enabled when it would
 * issue generation HISTORY + 1. The share it would grant is an expression
 * (NEW_SHARE) so the guard can test the bound before any write. */
#define MAX2(a, b) ((a) > (b) -> (a) : (b))
#define MIN2(a, b) ((a) < (b) -> (a) : (b))
#if defined(DEFAULT_CAP)
#define RES(m) MAX2(row_share[m], row_reported[m])
#elif defined(NO_UNACKED)
#define RES(m) MAX2(row_acked[m], row_reported[m])
#elif defined(NO_INFLIGHT)
#define RES(m) MAX2(row_acked[m], row_max_unacked[m])
#else
#define RES(m) MAX2(MAX2(row_acked[m], row_max_unacked[m]), row_reported[m])
#endif
/* Over the other live nodes; n counts as live (its report upserts it). */
#define LIVE(m, n) ((m) == (n) -> 1 : row_on[m])
#define BELOW(m, n) ((m) < (n) -> row_on[m] : 0)
#define RESV(m, n) (((m) != (n) && row_on[m] == 1) -> RES(m) : 0)
#if NODES == 1
#define COUNT(n) (LIVE(0, n))
#define RANK(n) (BELOW(0, n))
#define RESERVED(n) (RESV(0, n))
#elif NODES == 2
#define COUNT(n) (LIVE(0, n) + LIVE(1, n))
#define RANK(n) (BELOW(0, n) + BELOW(1, n))
#define RESERVED(n) (RESV(0, n) + RESV(1, n))
#else
#define COUNT(n) (LIVE(0, n) + LIVE(1, n) + LIVE(2, n))
#define RANK(n) (BELOW(0, n) + BELOW(1, n) + BELOW(2, n))
#define RESERVED(n) (RESV(0, n) + RESV(1, n) + RESV(2, n))
#endif
#define TARGET(n) \
  (LIMIT / COUNT(n) + (RANK(n) < LIMIT % COUNT(n) -> 1 : 0))
#define NEW_SHARE(n) MAX2(0, MIN2(TARGET(n), LIMIT - RESERVED(n)))
#define G0(n) MAX2(row_gen[n], snap_ap[n])
#define ISSUE(n) (row_on[n] == 0 || NEW_SHARE(n) != row_share[n])

#define REPORT(n) \
  :: d_step { \
       snap_on[n] == 2 && (!ISSUE(n) || G0(n) + 1 <= HISTORY) -> \
       fresh = 1 - row_on[n]; \
       target = NEW_SHARE(n); \
       g0 = G0(n); \
       row_on[n] = 1; \
       if \
       :: snap_ap[n] >= g0 -> row_acked[n] = row_share[n]; \
                              row_max_unacked[n] = 0 \
       :: else -> skip \
       fi; \
       row_gen[n] = g0; \
       row_reported[n] = snap_inflight[n]; \
       if \
       :: fresh == 1 || target != row_share[n] -> \
            row_share[n] = target; \
            row_gen[n] = g0 + 1; \
            if \
            :: row_gen[n] > snap_ap[n] -> \
                 row_max_unacked[n] = MAX2(row_max_unacked[n], target) \
            :: else -> skip \
            fi; \
            chan_on[n * HISTORY + row_gen[n] - 1] = 1; \
            chan_share[n * HISTORY + row_gen[n] - 1] = target \
       :: else -> skip \
       fi; \
       snap_on[n] = 0; snap_ap[n] = 0; snap_inflight[n] = 0; \
       printf("Report(%d):", n + 1); print_state(); check_invariants() \
     }

#define DELIVER(n, g) \
  :: d_step { \
       chan_on[n * HISTORY + g - 1] == 1 -> \
       if \
       :: g > ap[n] -> ap[n] = g; cap[n] = chan_share[n * HISTORY + g - 1] \
       :: else -> skip \
       fi; \
       chan_on[n * HISTORY + g - 1] = 0; \
       chan_share[n * HISTORY + g - 1] = 0; \
       printf("Deliver(%d, gen %d):", n + 1, g); print_state(); check_invariants() \
     }

#if HISTORY == 1
#define DELIVERIES(n) DELIVER(n, 1)
#elif HISTORY == 2
#define DELIVERIES(n) DELIVER(n, 1) DELIVER(n, 2)
#else
#define DELIVERIES(n) DELIVER(n, 1) DELIVER(n, 2) DELIVER(n, 3)
#endif

#define NODE_ACTIONS(n) \
  ACQUIRE(n) RELEASE(n) SNAPSHOT(n) REPORT(n) DELIVERIES(n)

active proctype Next() {
end:
  do
  NODE_ACTIONS(0)
#if NODES > 1
  NODE_ACTIONS(1)
#endif
#if NODES > 2
  NODE_ACTIONS(2)
#endif
  od
}
