/* Promela rendering of spec/GaleWindowCoupledLeasing.tla: leased admission
 * with WINDOW-COUPLED credits (the default), for an independent check by
 * the spin model checker (docs/formal_model.md). As DistributedLeasing.pml,
 * except that Roll also takes every node's credits (they die with the
 * window that granted them).
 *
 * State, as in the TLA+ spec: (pool, local[1..Nodes], admitted). `local` is
 * a Promela keyword, so the array is credits[0..NODES-1] here (the name
 * production's `credits(key)` gives it); node i of the spec is
 * credits[i - 1].
 *
 * One process runs one loop; each loop option is one TLA+ action as one
 * d_step (one deterministic, indivisible transition), and the loop chooses
 * nondeterministically among the enabled ones. The only control location
 * between steps is the loop head, so spin's states are the spec's states:
 * besides the spec's variables, spin's state vector holds only bookkeeping
 * that is the same in every state (the process's type and its program
 * counter, always the loop head), so "states, stored" equals the number of
 * reachable (pool, local, admitted) values.
 *
 * Invariants (TypeOK, Conservation, CoupledBound) are asserted in every
 * step on the state it reaches, and at the start of Roll on the state it
 * leaves: Roll has no guard, so every reachable state, the initial one
 * included, is checked.
 *
 * Constants default to spec/GaleWindowCoupledLeasing.cfg; override them
 * with  spin -a -DNODES=5 -DLIMIT=10 -DBATCH=2 GaleWindowCoupledLeasing.pml
 * Other flags, each expected to FAIL (a counterexample is the result):
 *   -DTIGHT         CoupledBound is tight: asserts admitted < LIMIT (the
 *                   spec names no tight invariant; this is CoupledBound's
 *                   negation at equality).
 *   -DBROKEN_CARRY  the negative control: Roll keeps the nodes' credits,
 *                   as DistributedLeasing's Roll does (UNCHANGED local).
 *                   Conservation breaks at the first Roll that finds a
 *                   node holding credits.
 *   -DBOUND_ONLY    drops the Conservation assertion, so that with
 *                   -DBROKEN_CARRY the violation found is CoupledBound
 *                   itself (TypeOK's ranges for pool and local still hold
 *                   for carried credits: DistributedLeasing.pml).
 * Run by tests/model/spin_check.sh. */

#ifndef NODES
#define NODES 3
#endif
#ifndef LIMIT
#define LIMIT 6
#endif
#ifndef BATCH
#define BATCH 3
#endif

/* The spec's ASSUME, plus what this rendering needs: the node options are
 * unrolled for at most 8 nodes, and every value must fit in a byte. */
#if NODES < 1 || NODES > 8
#error "NODES must be in 1..8"
#endif
#if LIMIT < 1 || BATCH < 1 || BATCH > LIMIT
#error "need LIMIT >= 1 and BATCH in 1..LIMIT"
#endif
#if LIMIT + NODES * BATCH > 255
#error "LIMIT + NODES * BATCH must fit in a byte"
#endif

/* Init */
byte pool = LIMIT;    /* credits the store's current window still holds */
byte credits[NODES];  /* the spec's local: credits node i holds (0 at Init) */
byte admitted = 0;    /* admissions since the current window began */

/* Scratch for the steps; hidden variables are not in the state vector. */
hidden byte k;
hidden byte sum;

inline check_invariants() {
  /* TypeOK: pool \in 0..Limit (a byte cannot be negative, and a pool that
   * wrapped below 0 would fail here), local \in [N -> 0..(Batch - 1)];
   * its admitted \in 0..Limit is CoupledBound below. */
  assert(pool <= LIMIT);
  for (k : 0 .. NODES - 1) {
    assert(credits[k] <= BATCH - 1)
  };
#ifndef BOUND_ONLY
  /* Conservation: admitted + pool + sum(local) = Limit */
  sum = admitted + pool;
  for (k : 0 .. NODES - 1) {
    sum = sum + credits[k]
  };
  assert(sum == LIMIT);
#endif
  /* CoupledBound */
  assert(admitted <= LIMIT);
#ifdef TIGHT
  /* not CoupledBound at equality: must be refuted */
  assert(admitted < LIMIT);
#endif
}

/* The state a step reached, printed when spin replays a counterexample
 * trail (spin -t; each step first prints its action's name). The verifier
 * (pan) prints nothing. */
inline print_state() {
  printf(" pool=%d local=<", pool);
  for (k : 0 .. NODES - 1) {
    printf(" %d", credits[k])
  };
  printf(" > admitted=%d\n", admitted)
}

/* Serve(i): a request at node i served from its local credits. */
#define SERVE(i) \
  :: d_step { \
       credits[i] > 0 -> \
       credits[i]--; \
       admitted++; \
       printf("Serve(%d):", i + 1); \
       print_state(); \
       check_invariants() \
     }

/* LeaseAndServe(i): a request at an empty node i leases
 * g = Min(Batch, pool) and spends one credit of it, in one step. */
#define LEASE_AND_SERVE(i) \
  :: d_step { \
       credits[i] == 0 && pool > 0 -> \
       credits[i] = (BATCH < pool -> BATCH : pool) - 1; \
       pool = pool - (credits[i] + 1); \
       admitted++; \
       printf("LeaseAndServe(%d):", i + 1); \
       print_state(); \
       check_invariants() \
     }

#define NODE_ACTIONS(i) SERVE(i) LEASE_AND_SERVE(i)

/* Next == \/ \E i \in N : Serve(i) \/ LeaseAndServe(i)
 *         \/ Roll */
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
#if NODES > 4
  NODE_ACTIONS(4)
#endif
#if NODES > 5
  NODE_ACTIONS(5)
#endif
#if NODES > 6
  NODE_ACTIONS(6)
#endif
#if NODES > 7
  NODE_ACTIONS(7)
#endif
  /* Roll: the window ends; a fresh budget, and every node's credits die
   * with it (local' = [i \in N |-> 0]). */
  :: d_step {
       check_invariants();
       pool = LIMIT;
       admitted = 0;
#ifndef BROKEN_CARRY
       for (k : 0 .. NODES - 1) {
         credits[k] = 0
       };
#endif
       printf("Roll:");
       print_state();
       check_invariants()
     }
  od
}
