/* Promela rendering of spec/GaleFederatedLeasing.tla: federation, one
 * global budget of LIMIT credits per window shared by REGIONS regions, for
 * an independent check by the spin model checker (docs/formal_model.md).
 * As GaleWindowCoupledLeasing.pml with the coordinator's pool named
 * `budget` and a node's credits named `balance`, plus the optional
 * Reconcile(r) (a region gives its leftover back within the window).
 *
 * State, as in the TLA+ spec: (budget, balance[1..Regions], admitted);
 * region r of the spec is balance[r - 1].
 *
 * One process runs one loop; each loop option is one TLA+ action as one
 * d_step (one deterministic, indivisible transition), and the loop chooses
 * nondeterministically among the enabled ones. The only control location
 * between steps is the loop head, so spin's states are the spec's states:
 * besides the spec's variables, spin's state vector holds only bookkeeping
 * that is the same in every state (the process's type and its program
 * counter, always the loop head), so "states, stored" equals the number of
 * reachable (budget, balance, admitted) values.
 *
 * Invariants (TypeOK, Conservation, FederatedBound) are asserted in every
 * step on the state it reaches, and at the start of Roll on the state it
 * leaves: Roll has no guard, so every reachable state, the initial one
 * included, is checked.
 *
 * Constants default to spec/GaleFederatedLeasing.cfg (WithReconcile =
 * FALSE); override them with
 *   spin -a -DREGIONS=5 -DLIMIT=10 -DBATCH=2 GaleFederatedLeasing.pml
 *   -DRECONCILE     WithReconcile = TRUE: the Reconcile(r) options exist.
 * Other flags, each expected to FAIL (a counterexample is the result):
 *   -DTIGHT         FederatedBound is tight: asserts admitted < LIMIT (the
 *                   spec names no tight invariant; this is FederatedBound's
 *                   negation at equality).
 *   -DBROKEN_ROLL   the negative control for window coupling: Roll keeps
 *                   the regions' balances, so the credits of a rolled
 *                   window's grant are still spent in the next one
 *                   (admissions paid from a budget that is not their
 *                   window's).
 *                   Conservation breaks at the first Roll that finds a
 *                   region holding credits.
 *   -DBROKEN_RECONCILE  (needs -DRECONCILE) the negative control for the
 *                   reconcile's window check: a region that held credits
 *                   when the window rolled still gives that leftover back,
 *                   and the coordinator adds it (capped at LIMIT) to the
 *                   CURRENT window's budget instead of forfeiting it. The
 *                   leftover pending is the extra array stale[] (in the
 *                   state vector only with this flag): Roll sets stale[r]
 *                   to the balance it kills, and StaleReconcile(r) adds it.
 *                   Conservation breaks at the first StaleReconcile.
 *                   (Dropping the Min(Limit, ...) cap instead breaks
 *                   nothing here: Conservation gives budget + balance[r]
 *                   <= Limit - admitted before every Reconcile, so the cap
 *                   never binds in this model.)
 *   -DBOUND_ONLY    drops the Conservation assertion, so that with
 *                   -DBROKEN_ROLL or -DBROKEN_RECONCILE the violation found
 *                   is FederatedBound itself (TypeOK's ranges still hold in
 *                   both: budget is reset to or capped at LIMIT, and a
 *                   balance is never above BATCH - 1).
 * Run by tests/model/spin_check.sh. */

#ifndef REGIONS
#define REGIONS 3
#endif
#ifndef LIMIT
#define LIMIT 6
#endif
#ifndef BATCH
#define BATCH 3
#endif

/* The spec's ASSUME, plus what this rendering needs: the region options
 * are unrolled for at most 8 regions, and every value must fit in a byte
 * (a broken variant admits at most LIMIT + REGIONS * (BATCH - 1) in a
 * window: the credits of its own budget and of one rolled window's). */
#if REGIONS < 1 || REGIONS > 8
#error "REGIONS must be in 1..8"
#endif
#if LIMIT < 1 || BATCH < 1 || BATCH > LIMIT
#error "need LIMIT >= 1 and BATCH in 1..LIMIT"
#endif
#if LIMIT + REGIONS * BATCH > 255
#error "LIMIT + REGIONS * BATCH must fit in a byte"
#endif
#if defined(BROKEN_RECONCILE) && !defined(RECONCILE)
#error "BROKEN_RECONCILE needs RECONCILE"
#endif

/* Init */
byte budget = LIMIT;   /* the coordinator's credits left in this window */
byte balance[REGIONS]; /* credits region r holds (0 at Init) */
byte admitted = 0;     /* admissions since the current window began */
#ifdef BROKEN_RECONCILE
byte stale[REGIONS];   /* leftover of the rolled window, still to be given */
#endif

/* Scratch for the steps; hidden variables are not in the state vector. */
hidden byte k;
hidden byte sum;

inline check_invariants() {
  /* TypeOK: budget \in 0..Limit (a byte cannot be negative, and a budget
   * that wrapped below 0 would fail here), balance \in
   * [R -> 0..(Batch - 1)]; its admitted \in 0..Limit is FederatedBound
   * below. */
  assert(budget <= LIMIT);
  for (k : 0 .. REGIONS - 1) {
    assert(balance[k] <= BATCH - 1)
  };
#ifndef BOUND_ONLY
  /* Conservation: admitted + budget + sum(balance) = Limit */
  sum = admitted + budget;
  for (k : 0 .. REGIONS - 1) {
    sum = sum + balance[k]
  };
  assert(sum == LIMIT);
#endif
  /* FederatedBound */
  assert(admitted <= LIMIT);
#ifdef TIGHT
  /* not FederatedBound at equality: must be refuted */
  assert(admitted < LIMIT);
#endif
}

/* The state a step reached, printed when spin replays a counterexample
 * trail (spin -t; each step first prints its action's name). The verifier
 * (pan) prints nothing. */
inline print_state() {
  printf(" budget=%d balance=<", budget);
  for (k : 0 .. REGIONS - 1) {
    printf(" %d", balance[k])
  };
#ifdef BROKEN_RECONCILE
  printf(" > stale=<");
  for (k : 0 .. REGIONS - 1) {
    printf(" %d", stale[k])
  };
#endif
  printf(" > admitted=%d\n", admitted)
}

/* Serve(r): a request at region r served from its balance. */
#define SERVE(r) \
  :: d_step { \
       balance[r] > 0 -> \
       balance[r]--; \
       admitted++; \
       printf("Serve(%d):", r + 1); \
       print_state(); \
       check_invariants() \
     }

/* LeaseAndServe(r): a request at an empty region r takes one coalesced
 * coordinator lease of g = Min(Batch, budget) and spends one credit of it,
 * in one step. */
#define LEASE_AND_SERVE(r) \
  :: d_step { \
       balance[r] == 0 && budget > 0 -> \
       balance[r] = (BATCH < budget -> BATCH : budget) - 1; \
       budget = budget - (balance[r] + 1); \
       admitted++; \
       printf("LeaseAndServe(%d):", r + 1); \
       print_state(); \
       check_invariants() \
     }

/* Reconcile(r): region r gives its leftover back within the window;
 * budget' = Min(Limit, budget + balance[r]), balance[r]' = 0. */
#ifdef RECONCILE
#define RECONCILE_OPT(r) \
  :: d_step { \
       balance[r] > 0 -> \
       sum = budget + balance[r]; \
       budget = (sum < LIMIT -> sum : LIMIT); \
       balance[r] = 0; \
       printf("Reconcile(%d):", r + 1); \
       print_state(); \
       check_invariants() \
     }
#else
#define RECONCILE_OPT(r)
#endif

/* StaleReconcile(r), BROKEN_RECONCILE only (no spec action): the leftover
 * of a rolled window, added to the current window's budget (capped). */
#ifdef BROKEN_RECONCILE
#define STALE_RECONCILE_OPT(r) \
  :: d_step { \
       stale[r] > 0 -> \
       sum = budget + stale[r]; \
       budget = (sum < LIMIT -> sum : LIMIT); \
       stale[r] = 0; \
       printf("StaleReconcile(%d):", r + 1); \
       print_state(); \
       check_invariants() \
     }
#else
#define STALE_RECONCILE_OPT(r)
#endif

#define REGION_ACTIONS(r) \
  SERVE(r) LEASE_AND_SERVE(r) RECONCILE_OPT(r) STALE_RECONCILE_OPT(r)

/* Next == \/ \E r \in R : Serve(r) \/ LeaseAndServe(r) \/ Reconcile(r)
 *         \/ Roll */
active proctype Next() {
  do
  REGION_ACTIONS(0)
#if REGIONS > 1
  REGION_ACTIONS(1)
#endif
#if REGIONS > 2
  REGION_ACTIONS(2)
#endif
#if REGIONS > 3
  REGION_ACTIONS(3)
#endif
#if REGIONS > 4
  REGION_ACTIONS(4)
#endif
#if REGIONS > 5
  REGION_ACTIONS(5)
#endif
#if REGIONS > 6
  REGION_ACTIONS(6)
#endif
#if REGIONS > 7
  REGION_ACTIONS(7)
#endif
  /* Roll: the window ends; a fresh budget, and every region's credits die
   * with it (balance' = [r \in R |-> 0]; a reconcile of the rolled window
   * is forfeited). */
  :: d_step {
       check_invariants();
       budget = LIMIT;
       admitted = 0;
#ifndef BROKEN_ROLL
       for (k : 0 .. REGIONS - 1) {
#ifdef BROKEN_RECONCILE
         stale[k] = balance[k];
#endif
         balance[k] = 0
       };
#endif
       printf("Roll:");
       print_state();
       check_invariants()
     }
  od
}
