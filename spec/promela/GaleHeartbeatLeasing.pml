/* Promela rendering of spec/GaleHeartbeatLeasing.tla: the distributed
 * concurrency coordinator's occupancy cap with synchronous reports, for an
 * independent check by the spin model checker (docs/formal_model.md).
 *
 * State, as in the TLA+ spec: (active, share[1..Nodes], inflight[1..Nodes]);
 * node i of the spec is index i - 1 here. One process runs one loop; each
 * loop option is one TLA+ action as one d_step, so spin's states are the
 * spec's states ("states, stored" = the reachable (active, share,
 * inflight) values; the process's bookkeeping is the same in every state).
 *
 * The invariants (TypeOK's ranges, SharesCap, InflightCap) are asserted at
 * the start of every Reallocate, on the state it leaves: some node is
 * always active, and Reallocate of an active node has no other guard, so
 * every reachable state is checked.
 *
 * Constants default to spec/GaleHeartbeatLeasing.cfg (Nodes 2, L 4);
 * override them with  spin -a -DNODES=3 -DLIMIT=6 GaleHeartbeatLeasing.pml
 * Flags, each expected to FAIL (a counterexample is the result):
 *   -DTIGHT        SharesCapTight and InflightCapTight (sum <= L - 1).
 *   -DSHARE_ONLY   the cap reserves a peer's share alone (the spec's
 *                  ShareOnlyCap): InflightCap is refuted.
 * And one that holds:
 *   -DSHARES_CAP_ONLY  asserts TypeOK and SharesCap only; with -DSHARE_ONLY
 *                  it shows the share-only cap still bounds the shares
 *                  (and counts that variant's states: 64 for the .cfg).
 * Run by tests/model/spin_check.sh. */

#ifndef NODES
#define NODES 2
#endif
#ifndef LIMIT
#define LIMIT 4
#endif

#if NODES < 1 || NODES > 4
#error "NODES must be in 1..4"
#endif
#if LIMIT < 1 || LIMIT > 60
#error "LIMIT must be in 1..60"
#endif

/* Init: every node active (`active` is a Promela keyword: the spec's
 * active set is live[] here), no shares, nothing in flight. */
bit live[NODES] = 1;
byte share[NODES];
byte inflight[NODES];

hidden byte k;
hidden int count;
hidden int rank;
hidden int target;
hidden int reserved;
hidden int sum_share;
hidden int sum_inflight;

inline check_invariants() {
  sum_share = 0;
  sum_inflight = 0;
  count = 0;
  for (k : 0 .. NODES - 1) {
    /* TypeOK */
    assert(share[k] <= LIMIT && inflight[k] <= LIMIT);
    sum_share = sum_share + share[k];
    sum_inflight = sum_inflight + inflight[k];
    count = count + live[k]
  };
  assert(count >= 1);
  /* SharesCap, InflightCap */
  assert(sum_share <= LIMIT);
#ifndef SHARES_CAP_ONLY
  assert(sum_inflight <= LIMIT);
#endif
#ifdef TIGHT
  /* SharesCapTight, InflightCapTight: must be refuted */
  assert(sum_share <= LIMIT - 1);
  assert(sum_inflight <= LIMIT - 1);
#endif
}

inline print_state() {
  printf(" active=<");
  for (k : 0 .. NODES - 1) {
    printf(" %d", live[k])
  };
  printf(" > share=<");
  for (k : 0 .. NODES - 1) {
    printf(" %d", share[k])
  };
  printf(" > inflight=<");
  for (k : 0 .. NODES - 1) {
    printf(" %d", inflight[k])
  };
  printf(" >\n")
}

#ifdef SHARE_ONLY
#define RESERVE(m) share[m]
#else
#define RESERVE(m) (share[m] > inflight[m] -> share[m] : inflight[m])
#endif

/* Reallocate(n): Target(n) = floor(L / |active|), plus one for the
 * (L mod |active|) lowest ids; share = max(0, min(target, L - reserved)). */
#define REALLOCATE(n) \
  :: d_step { \
       live[n] == 1 -> \
       check_invariants(); \
       count = 0; rank = 0; reserved = 0; \
       for (k : 0 .. NODES - 1) { \
         if \
         :: live[k] == 1 -> \
              count = count + 1; \
              if \
              :: k < n -> rank = rank + 1 \
              :: else -> skip \
              fi; \
              if \
              :: k != n -> reserved = reserved + RESERVE(k) \
              :: else -> skip \
              fi \
         :: else -> skip \
         fi \
       }; \
       target = LIMIT / count + (rank < LIMIT % count -> 1 : 0); \
       if \
       :: target > LIMIT - reserved -> target = LIMIT - reserved \
       :: else -> skip \
       fi; \
       if \
       :: target < 0 -> target = 0 \
       :: else -> skip \
       fi; \
       share[n] = target; \
       printf("Reallocate(%d):", n + 1); \
       print_state() \
     }

/* Join(n): share 0. */
#define JOIN(n) \
  :: d_step { \
       live[n] == 0 -> \
       live[n] = 1; \
       share[n] = 0; \
       printf("Join(%d):", n + 1); \
       print_state() \
     }

/* Leave(n): another node stays; n's share and in-flight work are gone. */
#define LEAVE(n) \
  :: d_step { \
       live[n] == 1 && ACTIVE_COUNT > 1 -> \
       live[n] = 0; \
       share[n] = 0; \
       inflight[n] = 0; \
       printf("Leave(%d):", n + 1); \
       print_state() \
     }

#define ACQUIRE(n) \
  :: d_step { \
       live[n] == 1 && inflight[n] < share[n] -> \
       inflight[n]++; \
       printf("Acquire(%d):", n + 1); \
       print_state() \
     }

#define RELEASE(n) \
  :: d_step { \
       inflight[n] > 0 -> \
       inflight[n]--; \
       printf("Release(%d):", n + 1); \
       print_state() \
     }

#if NODES == 1
#define ACTIVE_COUNT (live[0])
#elif NODES == 2
#define ACTIVE_COUNT (live[0] + live[1])
#elif NODES == 3
#define ACTIVE_COUNT (live[0] + live[1] + live[2])
#else
#define ACTIVE_COUNT (live[0] + live[1] + live[2] + live[3])
#endif

#define NODE_ACTIONS(n) REALLOCATE(n) JOIN(n) LEAVE(n) ACQUIRE(n) RELEASE(n)

/* Next == \E n \in N : Reallocate(n) \/ Join(n) \/ Leave(n)
 *                      \/ Acquire(n) \/ Release(n) */
active proctype Next() {
  do
  NODE_ACTIONS(0)
#if NODES > 1
  NODE_ACTIONS(1)
#endif
#if NODES > 2
  NODE_ACTIONS(2)
#endif
#if NODES > 3
  NODE_ACTIONS(3)
#endif
  od
}
