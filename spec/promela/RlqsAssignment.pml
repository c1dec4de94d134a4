/* The quota door's assignment protocol (docs/rlqs.md, "The design of
 * QuotaBudget" and "The bound"; docs/formal_model.md, "The quota door"),
 * for spin; spec/RlqsAssignment.tla states the same model in TLA+. One
 * budget of LIMIT tokens per fill interval of FILL ticks, split by
 * SERVERS quota servers among CLIENTS Envoys that enforce token buckets
 * locally; assignments carry a TTL and are never acknowledged.
 *
 * Time is discrete. A tick is an instant: within it any number of steps
 * happen, in any order; Tick moves to the next one. Every timestamp is
 * held relative to now (ages, lives, ticks left), so the state space is
 * finite and closed under time passing: the search covers runs of any
 * length, not a bounded horizon. One process runs one loop whose options
 * are d_steps (one deterministic, indivisible transition each; every
 * nondeterministic choice, such as the targets of an assign call, is an
 * option of its own), so spin's states are the model's states.
 *
 * The Envoys (client c; Envoy's rate_limit_quota filter, assumption A2):
 *   ik[c]   what is installed: 0 nothing, 1 DENY_ALL, 2 a token bucket
 *           {max_tokens = tokens_per_fill = iT[c], fill_interval = FILL}
 *   ir[c]   the bucket's fill RATIO in units of 1/UNITS (tokens =
 *           ir * iT / UNITS). UNITS is a multiple of FILL and of every
 *           T in 1..LIMIT, so the refill (UNITS / FILL per tick, capped
 *           at full), an admission (UNITS / T) and a replacement keeping
 *           the ratio are exact: no rounding anywhere. Envoy's own
 *           replacement rounds the tokens down, so this is Envoy or more.
 *   il[c]   ticks the installed assignment has left: TTL on arrival (a
 *           refresh too); dropped as tick arrival + TTL begins.
 *   st[c]   its stream: 0 none, s + 1 open to server s, DEAD broken
 *           (what is still in flight on it may arrive).
 * A token bucket arriving on nothing, DENY_ALL or an expired assignment
 * starts full; one identical to the installed bucket keeps the running
 * one (only the TTL restarts); a different one keeps the fill ratio.
 * Admit takes one request through a bucket holding a whole token;
 * nothing else admits (A4: DENY_ALL without an assignment).
 *
 * The network (A1): a stream is a FIFO queue of at most QCAP responses
 * (qT: the tokens, 0 = DENY_ALL; qa: its age in ticks). Its head may be
 * delivered or lost at any step; a response not delivered within SLACK
 * ticks of its sending is lost as the tick after its deadline begins; a
 * response sent to a full queue is lost. Break ends a stream (the server
 * forgets the client; what is in flight may still arrive); Connect opens
 * a new one, to a new client of the server, and loses what the old one
 * still carried (a break loses the rest).
 *
 * The servers run QuotaBudget::assign (src/server/quota_budget.cc) step
 * for step, per client (a stream), with a record staircase per client:
 * own(s, c, j) = committed_c(now + j), the largest T among c's records
 * with more than j ticks left, j in 0..SPAN-1, SPAN = TTL + SLACK (a
 * record sent now lives SPAN ticks). That is exactly what Records keeps
 * (by expiry, T strictly falling, its front committed_c): `at`, `add` and
 * the pruning of dominated records are a max over the staircase. Retired
 * records and a forgotten client's only count, so each server keeps their
 * sum as one staircase, dead(s, j). (lon, lT, lage) is `c.last`. An
 * assign call is one step: the lapse check and its retirement, targets
 * (ANY split of the share: a nondeterministic choice that includes every
 * water filling), lowerings (to DENY_ALL: retired first), raises capped
 * by share - sum of the others' committed, holding least first (ties:
 * either order, as client ids may sort either way), refreshes at TTL/2.
 * Its owner may call it at any step, any number of times per tick, or
 * not at all.
 *
 * With SERVERS = 2, the fleet (the design being built): a server's share
 * is its grant from the heartbeat coordinator (heartbeat_core.h step,
 * handoff mode). A beat is one step: the server's report (inflight = its
 * budget's committed(now), retired and forgotten records included, and
 * its applied generation), the coordinator's step, and its reply, applied
 * at once or lost. The coordinator's row is production's, with acked and
 * max_unacked kept as their max (rhold: the reserve uses nothing else)
 * and the generations as one bit, up(s): the server applied the row's
 * newest (applied_gen >= generation). The target is any value in
 * 0..LIMIT (every equal or demand split is one), capped exactly as
 * production caps it: LIMIT - the other live rows' max(acked,
 * max_unacked, inflight). The lease runs LEASE ticks from the beat's
 * sending, on the server and the coordinator alike (one clock: no margin
 * needed). Self-fencing: a server assigns with its applied share only
 * while now + TTL + SLACK <= its lease's end; past that it holds
 * (QuotaBudget::hold: what is in force stays, and each client due for its
 * refresh is lowered to DENY_ALL). Crash: the server restarts at once under
 * a new node id (a new incarnation: an empty budget, no row, no lease);
 * its old row is another node's and stays reserved until its lease lapses
 * (g*), its streams break (their Envoys keep what they installed), and
 * with -DGHOST what its clients could still hold stays counted, for the
 * invariant only, as gdead(s, j). A server crashes again only once its
 * previous incarnation's row is gone.
 *
 * Properties, asserted in the steps that can break them:
 *   Bound      admissions of all clients in every window of e + 1
 *              consecutive ticks (length e), e in 0..WINDOW:
 *                FILL * A <= LIMIT * e + FILL * LIMIT
 *                            + FILL * LIMIT * (e / SPAN + 1),
 *              A <= R*I/F + R + R*(floor(I/L) + 1) in integers. A monitor
 *              chooses where a window starts (as any tick begins) and
 *              counts its admissions for WINDOW + 1 ticks, checking every
 *              prefix.
 *   Installed  the sum over clients of their installed bucket's capacity
 *              <= LIMIT, at every instant.
 *   Committed  the sum over servers of committed(now) (every client's,
 *              retired and forgotten records, and with -DGHOST a crashed
 *              incarnation's) <= LIMIT, after every step.
 *
 * Two reductions, neither of which loses a violation:
 * - Clients admit only inside the monitor's window, and when a window
 *   ends every bucket is full again. Tokens are seen by nothing but
 *   admissions, and a bucket's tokens only help it admit later (the
 *   refill, the ratio and the cap are monotone in them), so a run that
 *   breaks the Bound in a window still breaks it with every admission
 *   outside that window dropped, and without admissions a bucket is
 *   always full.
 * - The clients are interchangeable (the raise order breaks ties either
 *   way; every other rule treats them alike), so each step ends by
 *   ordering them canonically (canon()); with -DPINNED (client c only
 *   ever connects to server c) the pairs (client c, server c) are. A
 *   trail says where it renumbered; -DNO_SYMMETRY turns this off.
 *
 * Constants: -DLIMIT (1..3, default 2), -DFILL (1..3, default 2), -DTTL
 * (default 2), -DSLACK (0..TTL/2, default 1), -DSERVERS (1 or 2, default
 * 1), -DCLIENTS (1 or 2, default 2), -DQCAP (default 2), -DWINDOW
 * (default SPAN), -DLEASE (default SPAN + 1). For the fleet's search:
 *   -DNO_ENVOY     no Envoys and no network: responses go nowhere, and
 *                  Committed (which holds what any Envoy could install)
 *                  is the property; no Bound.
 *   -DNO_BOUND     no windows, no admissions.
 *   -DPINNED       client c connects to server c only.
 *   -DNO_BREAK     no Break (a stream ends only with its server's crash).
 *   -DGHOST        count a crashed incarnation's records in Committed.
 * Negative controls, each expected to be refuted:
 *   -DNO_TTL_ACCOUNTING  a new record replaces the client's old ones: a
 *                        lowered assignment counts at its new value at
 *                        once (committed_c = the last T sent).
 *   -DNO_RETIRE          DENY_ALL and a lapse retire nothing: the client
 *                        keeps its records, as if its next bucket kept the
 *                        old one's ratio.
 *   -DFRESH_ON_CHANGE    a changed token bucket starts full (A2 broken, as
 *                        Envoy's filter did before it kept the ratio).
 *   -DLATE_OLD_STREAM    the old stream's responses in flight survive the
 *                        reconnect and may arrive after the new stream's
 *                        (A1's "a break loses the rest" broken).
 *   -DNO_FENCE           (fleet) a server assigns with its share until its
 *                        lease lapses: an assignment may outlive the lease.
 *   -DFENCE_SHORT        (fleet) the fence lets a record outlive the lease
 *                        by one tick.
 *   -DSAME_ID            (fleet) a crashed server restarts under its old
 *                        node id: its next beat (applied generation 0,
 *                        inflight 0) updates its old row.
 *   -DBOUND_ONLY         assert the Bound only, so that a control's
 *                        counterexample is one of admissions.
 *   -DPROBE_A=k          also assert that no window admits more than k:
 *                        refuted iff some window of at most WINDOW ticks
 *                        admits more (how close the model comes to the
 *                        Bound).
 * And -DLAPSE_OLD: QuotaBudget's lapse test before the slack-0 finding
 * (only "sent more than TTL - SLACK ago"), refuted at SLACK = 0
 * (docs/formal_model.md).
 * Run by tests/model/spin_check.sh. */

#ifndef LIMIT
#define LIMIT 2
#endif
#ifndef FILL
#define FILL 2
#endif
#ifndef TTL
#define TTL 2
#endif
#ifndef SLACK
#define SLACK 1
#endif
#ifndef SERVERS
#define SERVERS 1
#endif
#ifndef CLIENTS
#define CLIENTS 2
#endif
#ifndef QCAP
#define QCAP 2
#endif
#define SPAN (TTL + SLACK)
#ifndef WINDOW
#define WINDOW SPAN
#endif
#ifndef LEASE
#define LEASE (SPAN + 1)
#endif

#if LIMIT < 1 || LIMIT > 3
#error "LIMIT must be in 1..3"
#endif
#if FILL < 1 || FILL > 3
#error "FILL must be in 1..3"
#endif
#if TTL < 1 || TTL > 6 || SLACK < 0 || 2 * SLACK > TTL
#error "need TTL in 1..6 and SLACK in 0..TTL/2 (QuotaBudget::create)"
#endif
#if SERVERS < 1 || SERVERS > 2 || CLIENTS < 1 || CLIENTS > 2
#error "SERVERS and CLIENTS must be 1 or 2"
#endif
#if QCAP < 1 || QCAP > 4 || WINDOW < 0 || WINDOW > 20
#error "need QCAP in 1..4 and WINDOW in 0..20"
#endif
#if LEASE < 1 || LEASE > 20
#error "need LEASE in 1..20"
#endif
#if defined(LATE_OLD_STREAM) && defined(PINNED) && !defined(NO_SYMMETRY)
#error "LATE_OLD_STREAM with PINNED needs NO_SYMMETRY (canon() swaps no old queue for pairs)"
#endif

/* UNITS: the least common multiple of FILL and 1..LIMIT. */
#if LIMIT == 1
#define LCMR 1
#elif LIMIT == 2
#define LCMR 2
#else
#define LCMR 6
#endif
#if FILL == 1 || (FILL == 2 && LIMIT >= 2) || (FILL == 3 && LIMIT >= 3)
#define UNITS LCMR
#else
#define UNITS (LCMR * FILL)
#endif

#define DEAD (SERVERS + 1)
#if defined(NO_BOUND) || defined(NO_ENVOY)
#define BOUND_ON 0
#else
#define BOUND_ON 1
#endif
/* c.last's age saturates here: lapsed (older than TTL - SLACK) */
#define LAPSED (TTL - SLACK + 1)

/* The Envoys */
byte ik[CLIENTS];
byte iT[CLIENTS];
byte ir[CLIENTS];
byte il[CLIENTS];
byte st[CLIENTS];
/* Their streams: slot i of client c at c * QCAP + i, the head at i = 0 */
byte ql[CLIENTS];
byte qT[CLIENTS * QCAP];
byte qa[CLIENTS * QCAP];
#ifdef LATE_OLD_STREAM
/* The previous stream's responses still in flight (see the flag) */
byte oql[CLIENTS];
byte oqT[CLIENTS * QCAP];
byte oqa[CLIENTS * QCAP];
#define OQT(c, i) oqT[(c) * QCAP + (i)]
#define OQA(c, i) oqa[(c) * QCAP + (i)]
#endif

/* The servers' budgets: client c of server s at s * CLIENTS + c */
byte own[SERVERS * CLIENTS * SPAN];
byte dead[SERVERS * SPAN];
bit lon[SERVERS * CLIENTS];
byte lT[SERVERS * CLIENTS];
byte lage[SERVERS * CLIENTS];
#define OWN(s, c, j) own[((s) * CLIENTS + (c)) * SPAN + (j)]
#define DEADP(s, j) dead[(s) * SPAN + (j)]
#define LON(s, c) lon[(s) * CLIENTS + (c)]
#define LT(s, c) lT[(s) * CLIENTS + (c)]
#define LAGE(s, c) lage[(s) * CLIENTS + (c)]
#define QT(c, i) qT[(c) * QCAP + (i)]
#define QA(c, i) qa[(c) * QCAP + (i)]

#if SERVERS == 2
/* Server side: the share applied, ticks of lease left, and whether it
 * applied its row's newest generation */
byte sh[SERVERS];
byte ls[SERVERS];
bit up[SERVERS];
/* The coordinator's row of each server's current incarnation: share,
 * max(acked, max_unacked), reported inflight, ticks to expiry */
bit ron[SERVERS];
byte rsh[SERVERS];
byte rhold[SERVERS];
byte rinf[SERVERS];
byte rexp[SERVERS];
/* The row of its previous incarnation, until its lease lapses: its
 * reserve and ticks to expiry */
bit gon[SERVERS];
byte gres[SERVERS];
byte gexp[SERVERS];
#ifdef GHOST
/* What the previous incarnations' clients could still hold */
byte gdead[SERVERS * SPAN];
#define GDEAD(s, j) gdead[(s) * SPAN + (j)]
#endif
#endif

/* The choices of an assign call or a beat: always 0 between steps */
byte tg[CLIENTS];
byte ord;
byte ctg;
bit rlost;

/* The window monitor */
bit mon;
byte mA;
byte me;

/* Scratch: not in the state vector */
hidden byte c1;
hidden byte c2;
hidden byte j1;
hidden byte j2;
hidden byte s1;
hidden byte val;
hidden byte snt[CLIENTS];
hidden byte cand[CLIENTS];
hidden byte first;
hidden int share;
hidden int total;
hidden int mine;
hidden int grant;
hidden int sum;
hidden int res;

hidden byte fresh;
hidden byte cmp;
hidden byte tmp;

#define MAX2(a, b) ((a) > (b) -> (a) : (b))
/* What the coordinator reserves for row m: max(acked, max_unacked,
 * inflight) */
#define RESERVE(m) MAX2(rhold[m], rinf[m])
#define MIN2(a, b) ((a) < (b) -> (a) : (b))
#define HELD(s, c) (LON(s, c) -> LT(s, c) + 1 : 0)

inline check_installed() {
#ifndef BOUND_ONLY
  sum = 0;
  for (c2 : 0 .. CLIENTS - 1) {
    if
    :: ik[c2] == 2 -> sum = sum + iT[c2]
    :: else -> skip
    fi
  };
  assert(sum <= LIMIT)   /* Installed */
#else
  skip
#endif
}

inline check_committed() {
#ifndef BOUND_ONLY
  sum = 0;
  for (s1 : 0 .. SERVERS - 1) {
    sum = sum + DEADP(s1, 0);
#if SERVERS == 2 && defined(GHOST)
    sum = sum + GDEAD(s1, 0);
#endif
    for (c2 : 0 .. CLIENTS - 1) { sum = sum + OWN(s1, c2, 0) }
  };
  assert(sum <= LIMIT)   /* Committed */
#else
  skip
#endif
}

inline check_bound() {
  assert(FILL * mA <= LIMIT * me + FILL * LIMIT
                      + FILL * LIMIT * (me / SPAN + 1));  /* Bound */
#ifdef PROBE_A
  /* How tight the bound is: refuted iff some window of at most WINDOW
   * ticks admits more than PROBE_A. */
  assert(mA <= PROBE_A)
#else
  skip
#endif
}

inline print_state() {
  printf(" installed=<");
  for (c2 : 0 .. CLIENTS - 1) {
    if
    :: ik[c2] == 0 -> printf(" -")
    :: ik[c2] == 1 -> printf(" DENY(%d)", il[c2])
    :: ik[c2] == 2 -> printf(" %d@%d/%d(%d)", iT[c2], ir[c2], UNITS, il[c2])
    fi
  };
  printf(" > committed=<");
  for (s1 : 0 .. SERVERS - 1) {
    for (c2 : 0 .. CLIENTS - 1) { printf(" %d", OWN(s1, c2, 0)) };
    printf(" +%d", DEADP(s1, 0));
#if SERVERS == 2 && defined(GHOST)
    printf(" +%d (crashed) share %d lease %d row %d;", GDEAD(s1, 0), sh[s1],
           ls[s1], (ron[s1] -> RESERVE(s1) : 0) + (gon[s1] -> gres[s1] : 0));
#elif SERVERS == 2
    printf(" share %d lease %d row %d;", sh[s1], ls[s1],
           (ron[s1] -> RESERVE(s1) : 0) + (gon[s1] -> gres[s1] : 0));
#endif
  };
  printf(" > window=");
  if
  :: mon -> printf("%d in %d", mA, me)
  :: else -> printf("off")
  fi;
  printf("\n")
}

/* Symmetry (the header's second reduction): each step ends by ordering
 * the clients (with -DPINNED, the pairs of a client and its server) so
 * that client 0's state (Envoy, stream, its slot at every server) is
 * lexicographically at most client 1's: a state and its mirror image are
 * one state. -DNO_SYMMETRY keeps the numbering. */
#define CMPF(a, b) \
  if \
  :: cmp == 0 && (a) < (b) -> cmp = 1 \
  :: cmp == 0 && (a) > (b) -> cmp = 2 \
  :: else -> skip \
  fi
#define SWAPF(a, b) tmp = a; a = b; b = tmp
#define SMAP(v) ((v) == 1 -> 2 : ((v) == 2 -> 1 : (v)))

inline canon() {
#if CLIENTS == 2 && SERVERS == 2 && defined(PINNED) && !defined(NO_SYMMETRY)
  /* Client c is server c's: swap the pairs (client and server) */
  cmp = 0;
  CMPF(SMAP(st[1]), st[0]); CMPF(ik[1], ik[0]); CMPF(iT[1], iT[0]);
  CMPF(ir[1], ir[0]); CMPF(il[1], il[0]); CMPF(ql[1], ql[0]);
  for (j1 : 0 .. QCAP - 1) {
    CMPF(QT(1, j1), QT(0, j1)); CMPF(QA(1, j1), QA(0, j1))
  };
  CMPF(LON(1, 1), LON(0, 0)); CMPF(LT(1, 1), LT(0, 0));
  CMPF(LAGE(1, 1), LAGE(0, 0));
  for (j1 : 0 .. SPAN - 1) {
    CMPF(OWN(1, 1, j1), OWN(0, 0, j1)); CMPF(DEADP(1, j1), DEADP(0, j1))
  };
  CMPF(sh[1], sh[0]); CMPF(ls[1], ls[0]); CMPF(up[1], up[0]);
  CMPF(ron[1], ron[0]); CMPF(rsh[1], rsh[0]); CMPF(rhold[1], rhold[0]);
  CMPF(rinf[1], rinf[0]); CMPF(rexp[1], rexp[0]);
  CMPF(gon[1], gon[0]); CMPF(gres[1], gres[0]); CMPF(gexp[1], gexp[0]);
#ifdef GHOST
  for (j1 : 0 .. SPAN - 1) { CMPF(GDEAD(1, j1), GDEAD(0, j1)) };
#endif
  if
  :: cmp == 1 ->
     tmp = SMAP(st[1]); st[1] = SMAP(st[0]); st[0] = tmp;
     SWAPF(ik[1], ik[0]); SWAPF(iT[1], iT[0]);
     SWAPF(ir[1], ir[0]); SWAPF(il[1], il[0]); SWAPF(ql[1], ql[0]);
     for (j1 : 0 .. QCAP - 1) {
       SWAPF(QT(1, j1), QT(0, j1)); SWAPF(QA(1, j1), QA(0, j1))
     };
     SWAPF(LON(1, 1), LON(0, 0)); SWAPF(LT(1, 1), LT(0, 0));
     SWAPF(LAGE(1, 1), LAGE(0, 0));
     for (j1 : 0 .. SPAN - 1) {
       SWAPF(OWN(1, 1, j1), OWN(0, 0, j1)); SWAPF(DEADP(1, j1), DEADP(0, j1))
     };
     SWAPF(sh[1], sh[0]); SWAPF(ls[1], ls[0]); SWAPF(up[1], up[0]);
     SWAPF(ron[1], ron[0]); SWAPF(rsh[1], rsh[0]); SWAPF(rhold[1], rhold[0]);
     SWAPF(rinf[1], rinf[0]); SWAPF(rexp[1], rexp[0]);
     SWAPF(gon[1], gon[0]); SWAPF(gres[1], gres[0]); SWAPF(gexp[1], gexp[0]);
#ifdef GHOST
     for (j1 : 0 .. SPAN - 1) { SWAPF(GDEAD(1, j1), GDEAD(0, j1)) };
#endif
     printf(" [servers and clients renumbered 0 <-> 1]")
  :: else -> skip
  fi;
  cmp = 0; tmp = 0
#elif CLIENTS == 2 && !defined(PINNED) && !defined(NO_SYMMETRY)
  cmp = 0;
  CMPF(st[1], st[0]); CMPF(ik[1], ik[0]); CMPF(iT[1], iT[0]);
  CMPF(ir[1], ir[0]); CMPF(il[1], il[0]); CMPF(ql[1], ql[0]);
  for (j1 : 0 .. QCAP - 1) {
    CMPF(QT(1, j1), QT(0, j1)); CMPF(QA(1, j1), QA(0, j1))
  };
  for (s1 : 0 .. SERVERS - 1) {
    CMPF(LON(s1, 1), LON(s1, 0)); CMPF(LT(s1, 1), LT(s1, 0));
    CMPF(LAGE(s1, 1), LAGE(s1, 0));
    for (j1 : 0 .. SPAN - 1) { CMPF(OWN(s1, 1, j1), OWN(s1, 0, j1)) }
  };
#ifdef LATE_OLD_STREAM
  CMPF(oql[1], oql[0]);
  for (j1 : 0 .. QCAP - 1) {
    CMPF(OQT(1, j1), OQT(0, j1)); CMPF(OQA(1, j1), OQA(0, j1))
  };
#endif
  if
  :: cmp == 1 ->
#ifdef LATE_OLD_STREAM
     SWAPF(oql[1], oql[0]);
     for (j1 : 0 .. QCAP - 1) {
       SWAPF(OQT(1, j1), OQT(0, j1)); SWAPF(OQA(1, j1), OQA(0, j1))
     };
#endif
     SWAPF(st[1], st[0]); SWAPF(ik[1], ik[0]); SWAPF(iT[1], iT[0]);
     SWAPF(ir[1], ir[0]); SWAPF(il[1], il[0]); SWAPF(ql[1], ql[0]);
     for (j1 : 0 .. QCAP - 1) {
       SWAPF(QT(1, j1), QT(0, j1)); SWAPF(QA(1, j1), QA(0, j1))
     };
     for (s1 : 0 .. SERVERS - 1) {
       SWAPF(LON(s1, 1), LON(s1, 0)); SWAPF(LT(s1, 1), LT(s1, 0));
       SWAPF(LAGE(s1, 1), LAGE(s1, 0));
       for (j1 : 0 .. SPAN - 1) { SWAPF(OWN(s1, 1, j1), OWN(s1, 0, j1)) }
     };
     printf(" [clients renumbered 0 <-> 1]")
  :: else -> skip
  fi;
  cmp = 0; tmp = 0
#else
  skip
#endif
}

/* QuotaBudget::send: record (T, now + TTL + SLACK), set last, push. */
inline send(s, c, T) {
#ifdef NO_TTL_ACCOUNTING
  for (j2 : 0 .. SPAN - 1) { OWN(s, c, j2) = T };
#else
  for (j2 : 0 .. SPAN - 1) { OWN(s, c, j2) = MAX2(OWN(s, c, j2), T) };
#endif
  LON(s, c) = 1;
  LT(s, c) = T;
  LAGE(s, c) = 0;
#ifndef NO_ENVOY
  if
  :: ql[c] < QCAP -> QT(c, ql[c]) = T; QA(c, ql[c]) = 0; ql[c]++
  :: else -> skip   /* the queue is full: lost */
  fi
#endif
}

/* QuotaBudget::retire: the records go on counting; c starts afresh. */
inline retire(s, c) {
#ifndef NO_RETIRE
  for (j2 : 0 .. SPAN - 1) {
    DEADP(s, j2) = DEADP(s, j2) + OWN(s, c, j2);
    OWN(s, c, j2) = 0
  };
#endif
  LON(s, c) = 0;
  LT(s, c) = 0;
  LAGE(s, c) = 0
}

/* QuotaBudget::forget (the stream broke): its records count until they
 * expire, as a forgotten client's. */
inline forget(s, c) {
  for (j2 : 0 .. SPAN - 1) {
    DEADP(s, j2) = DEADP(s, j2) + OWN(s, c, j2);
    OWN(s, c, j2) = 0
  };
  LON(s, c) = 0;
  LT(s, c) = 0;
  LAGE(s, c) = 0
}

/* QuotaBudget::lapsed: sent more than TTL - SLACK ago, or its record has
 * expired (sent TTL + SLACK ago or more), which only adds the instant
 * now == sent + TTL when SLACK is 0. -DLAPSE_OLD: the first test alone. */
#ifdef LAPSE_OLD
#define LAPSED_NOW(s, c) (LAGE(s, c) > TTL - SLACK)
#else
#define LAPSED_NOW(s, c) (LAGE(s, c) > TTL - SLACK || LAGE(s, c) >= SPAN)
#endif

/* One raise of QuotaBudget::assign (the loop over `raises`). */
inline raise_one(s, c) {
  if
  :: cand[c] ->
     mine = OWN(s, c, 0);
     grant = share - (total - mine);
     grant = MAX2(grant, 0);
     grant = MIN2(grant, tg[c]);
     if
     :: LON(s, c) && grant <= LT(s, c) -> skip
     :: else ->
        val = grant;
        send(s, c, val);
        snt[c] = 1;
        total = total + MAX2(mine, grant) - mine
     fi
  :: else -> skip
  fi
}

/* Lapsed assignments: a token bucket's records are retired. */
inline lapse(s) {
  for (c1 : 0 .. CLIENTS - 1) {
    if
    :: st[c1] == s + 1 && LON(s, c1) && LAPSED_NOW(s, c1) ->
       if
       :: LT(s, c1) > 0 -> retire(s, c1)
       :: else -> LON(s, c1) = 0; LT(s, c1) = 0; LAGE(s, c1) = 0
       fi
    :: else -> skip
    fi
  }
}

/* QuotaBudget::hold(now): server s's share is fenced. What is in force
 * stays, nothing is raised or refreshed, and a client due for its refresh
 * (or holding nothing) is sent DENY_ALL, retired first. */
inline hold(s) {
  lapse(s);
  for (c1 : 0 .. CLIENTS - 1) {
    if
    :: st[c1] == s + 1 && (!LON(s, c1) || 2 * LAGE(s, c1) >= TTL) ->
       if
       :: LON(s, c1) && LT(s, c1) > 0 -> retire(s, c1)
       :: else -> skip
       fi;
       val = 0;
       send(s, c1, val)
    :: else -> skip
    fi
  };
  check_committed()
}

/* QuotaBudget::assign(share, now) with the targets tg[] (chosen by the
 * caller, sum <= share) and the tie order `ord`. */
inline assign(s) {
  lapse(s);
  total = DEADP(s, 0);
  for (c1 : 0 .. CLIENTS - 1) { total = total + OWN(s, c1, 0); snt[c1] = 0 };
  /* Lowerings: sent at once; to DENY_ALL, retired first. */
  for (c1 : 0 .. CLIENTS - 1) {
    if
    :: st[c1] == s + 1 && LON(s, c1) && tg[c1] < LT(s, c1) ->
       if
       :: tg[c1] == 0 -> retire(s, c1)
       :: else -> skip
       fi;
       val = tg[c1];
       send(s, c1, val);
       snt[c1] = 1
    :: else -> skip
    fi
  };
  /* Raises: holding least first. */
  for (c1 : 0 .. CLIENTS - 1) {
    cand[c1] = (st[c1] == s + 1 && (!LON(s, c1) || tg[c1] > LT(s, c1)))
  };
#if CLIENTS == 2
  first = ((HELD(s, 1) < HELD(s, 0) || (HELD(s, 1) == HELD(s, 0) && ord)) -> 1 : 0);
  raise_one(s, first);
  raise_one(s, 1 - first);
#else
  raise_one(s, 0);
#endif
  /* Refreshes: unchanged for half the TTL. */
  for (c1 : 0 .. CLIENTS - 1) {
    if
    :: st[c1] == s + 1 && !snt[c1] && LON(s, c1) && 2 * LAGE(s, c1) >= TTL ->
       val = LT(s, c1);
       send(s, c1, val)
    :: else -> skip
    fi
  };
  check_committed()
}

/* The share server s assigns with now. */
#if SERVERS == 1
#define SHARE(s) LIMIT
#elif defined(NO_FENCE)
#define SHARE(s) (ls[s] > 0 -> sh[s] : 0)
#elif defined(FENCE_SHORT)
#define SHARE(s) (ls[s] >= SPAN - 1 -> sh[s] : 0)
#else
#define SHARE(s) (ls[s] >= SPAN -> sh[s] : 0)
#endif
/* Fenced: the share reads 0 though the share applied is higher; the
 * server then holds (QuotaBudget::hold). */
#if SERVERS == 1
#define FENCED(s) 0
#else
#define FENCED(s) (sh[s] > 0 && SHARE(s) == 0)
#endif

/* One assign call of server s: its targets tg[] (any split of the share
 * among its clients) and, when two clients hold the same, the tie order
 * `ord` are chosen first; the call itself is one d_step. The choices are
 * state variables, 0 again when the step ends, and an atomic sequence's
 * inner states are not stored, so the step adds no state. */
#define PICK(v, bound) \
  if \
  :: v = 0 \
  :: 1 <= (bound) -> v = 1 \
  :: 2 <= (bound) -> v = 2 \
  :: 3 <= (bound) -> v = 3 \
  fi

#define ASSIGN(s) \
  :: atomic { \
       true -> \
       if \
       :: st[0] == s + 1 -> PICK(tg[0], SHARE(s)) \
       :: else -> skip \
       fi; \
       PICK_SECOND(s) \
       d_step { \
         share = SHARE(s); \
         if \
         :: FENCED(s) -> hold(s) \
         :: else -> assign(s) \
         fi; \
         printf("Assign(%d, targets", s); \
         for (c2 : 0 .. CLIENTS - 1) { printf(" %d", tg[c2]) }; \
         printf("):"); canon(); print_state(); \
         for (c2 : 0 .. CLIENTS - 1) { tg[c2] = 0; snt[c2] = 0; cand[c2] = 0 }; \
         ord = 0; share = 0; total = 0; mine = 0; grant = 0; val = 0 \
       } \
     }

#if CLIENTS == 2
#define TIE(s) (st[0] == s + 1 && st[1] == s + 1 && HELD(s, 0) == HELD(s, 1))
#define PICK_SECOND(s) \
       if \
       :: st[1] == s + 1 -> PICK(tg[1], SHARE(s) - tg[0]) \
       :: else -> skip \
       fi; \
       if \
       :: TIE(s) -> if :: ord = 0 :: ord = 1 fi \
       :: else -> skip \
       fi;
#else
#define PICK_SECOND(s)
#endif

inline admit(c) {
  ir[c] = ir[c] - UNITS / iT[c];
  mA++;
  check_bound()
}

#define ADMIT(c) \
  :: d_step { \
       mon && c < CLIENTS && ik[c] == 2 && ir[c] * iT[c] >= UNITS -> \
       admit(c); \
       printf("Admit(%d):", c); canon(); print_state() \
     }

/* Pops the head of c's queue into val. */
inline pop(c) {
  val = QT(c, 0);
  for (j1 : 1 .. QCAP - 1) {
    QT(c, j1 - 1) = QT(c, j1);
    QA(c, j1 - 1) = QA(c, j1)
  };
  QT(c, QCAP - 1) = 0;
  QA(c, QCAP - 1) = 0;
  ql[c]--;
  if
  :: st[c] == DEAD && ql[c] == 0 -> st[c] = 0
  :: else -> skip
  fi
}

/* Envoy installs what arrives (A2). */
inline install(c) {
  if
  :: val == 0 -> ik[c] = 1; iT[c] = 0; ir[c] = 0
  :: val > 0 && ik[c] == 2 && iT[c] == val -> skip
  :: val > 0 && ik[c] == 2 && iT[c] != val ->
     iT[c] = val;
#ifdef FRESH_ON_CHANGE
     ir[c] = UNITS
#else
     skip
#endif
  :: val > 0 && ik[c] != 2 -> ik[c] = 2; iT[c] = val; ir[c] = UNITS
  fi;
  il[c] = TTL
}

#define DELIVER(c) \
  :: d_step { \
       c < CLIENTS && ql[c] > 0 -> \
       pop(c); \
       install(c); \
       check_installed(); \
       printf("Deliver(%d, %d):", c, val); canon(); print_state(); \
       val = 0 \
     }

#define LOSE(c) \
  :: d_step { \
       c < CLIENTS && ql[c] > 0 -> \
       pop(c); \
       printf("Lose(%d, %d):", c, val); canon(); print_state(); \
       val = 0 \
     }

/* The stream breaks: the server forgets the client; what is in flight
 * may still arrive. */
#define BREAK(c) \
  :: d_step { \
       c < CLIENTS && st[c] >= 1 && st[c] <= SERVERS -> \
       s1 = st[c] - 1; \
       forget(s1, c); \
       st[c] = (ql[c] > 0 -> DEAD : 0); \
       printf("Break(%d):", c); canon(); print_state() \
     }

/* A new stream to server s (a new client for it), after a break: what
 * the old stream still carried is lost. */
#define CONNECT(c, s) \
  :: d_step { \
       c < CLIENTS && s < SERVERS && PINNED_OK(c, s) && \
       (st[c] == 0 || st[c] == DEAD) -> \
       KEEP_OLD(c) \
       for (j1 : 0 .. QCAP - 1) { QT(c, j1) = 0; QA(c, j1) = 0 }; \
       ql[c] = 0; \
       st[c] = s + 1; \
       printf("Connect(%d, %d):", c, s); canon(); print_state() \
     }

/* -DLATE_OLD_STREAM: the old stream's responses in flight are not lost
 * when the Envoy opens a new one; they may still arrive, after the new
 * stream's (the stream before that one loses its rest). */
#ifdef LATE_OLD_STREAM
#define KEEP_OLD(c) \
       for (j1 : 0 .. QCAP - 1) { OQT(c, j1) = QT(c, j1); OQA(c, j1) = QA(c, j1) }; \
       oql[c] = ql[c];
#define OLD_STREAM(c) \
  :: d_step { \
       c < CLIENTS && oql[c] > 0 -> \
       popold(c); install(c); check_installed(); \
       printf("DeliverOld(%d, %d):", c, val); canon(); print_state(); val = 0 \
     } \
  :: d_step { \
       c < CLIENTS && oql[c] > 0 -> \
       popold(c); \
       printf("LoseOld(%d, %d):", c, val); canon(); print_state(); val = 0 \
     }
inline popold(c) {
  val = OQT(c, 0);
  for (j1 : 1 .. QCAP - 1) {
    OQT(c, j1 - 1) = OQT(c, j1);
    OQA(c, j1 - 1) = OQA(c, j1)
  };
  OQT(c, QCAP - 1) = 0;
  OQA(c, QCAP - 1) = 0;
  oql[c]--
}
#else
#define KEEP_OLD(c)
#define OLD_STREAM(c)
#endif

#ifdef PINNED
#define PINNED_OK(c, s) ((c) == (s))
#else
#define PINNED_OK(c, s) 1
#endif

inline tick() {
  for (c1 : 0 .. CLIENTS - 1) {
    /* Envoy: refill, then drop what has run TTL ticks */
    if
    :: ik[c1] == 2 -> ir[c1] = MIN2(UNITS, ir[c1] + UNITS / FILL)
    :: else -> skip
    fi;
    if
    :: ik[c1] > 0 ->
       il[c1]--;
       if
       :: il[c1] == 0 -> ik[c1] = 0; iT[c1] = 0; ir[c1] = 0
       :: else -> skip
       fi
    :: else -> skip
    fi;
    /* The network: age; past the deadline, lost */
    for (j1 : 0 .. QCAP - 1) {
      if
      :: j1 < ql[c1] -> QA(c1, j1)++
      :: else -> skip
      fi
    };
    do
    :: ql[c1] > 0 && QA(c1, 0) > SLACK -> pop(c1)
    :: else -> break
    od;
#ifdef LATE_OLD_STREAM
    for (j1 : 0 .. QCAP - 1) {
      if
      :: j1 < oql[c1] -> OQA(c1, j1)++
      :: else -> skip
      fi
    };
    do
    :: oql[c1] > 0 && OQA(c1, 0) > SLACK -> popold(c1)
    :: else -> break
    od;
#endif
    skip
  };
  val = 0;
  /* The servers: records age, last sent ages */
  for (s1 : 0 .. SERVERS - 1) {
    for (j1 : 0 .. SPAN - 2) {
      DEADP(s1, j1) = DEADP(s1, j1 + 1);
#if SERVERS == 2 && defined(GHOST)
      GDEAD(s1, j1) = GDEAD(s1, j1 + 1);
#endif
      for (c1 : 0 .. CLIENTS - 1) { OWN(s1, c1, j1) = OWN(s1, c1, j1 + 1) }
    };
    DEADP(s1, SPAN - 1) = 0;
#if SERVERS == 2 && defined(GHOST)
    GDEAD(s1, SPAN - 1) = 0;
#endif
    for (c1 : 0 .. CLIENTS - 1) {
      OWN(s1, c1, SPAN - 1) = 0;
      if
      :: LON(s1, c1) && LAGE(s1, c1) < LAPSED -> LAGE(s1, c1)++
      :: else -> skip
      fi
    }
  };
#if SERVERS == 2
  for (s1 : 0 .. SERVERS - 1) {
    if
    :: ls[s1] > 0 -> ls[s1]--
    :: else -> skip
    fi;
    /* A row whose lease lapsed reserves nothing (evicted at the next
     * beat; its owner's next beat re-joins as new either way). */
    if
    :: ron[s1] ->
       rexp[s1]--;
       if
       :: rexp[s1] == 0 ->
          ron[s1] = 0; rsh[s1] = 0; rhold[s1] = 0; rinf[s1] = 0;
          up[s1] = 0
       :: else -> skip
       fi
    :: else -> skip
    fi;
    if
    :: gon[s1] ->
       gexp[s1]--;
       if
       :: gexp[s1] == 0 -> gon[s1] = 0; gres[s1] = 0
       :: else -> skip
       fi
    :: else -> skip
    fi
  };
#endif
  /* The monitor's window: one tick longer, or over */
  if
  :: mon ->
     me++;
     if
     :: me > WINDOW ->
        mon = 0; mA = 0; me = 0;
        for (c1 : 0 .. CLIENTS - 1) {
          if
          :: ik[c1] == 2 -> ir[c1] = UNITS
          :: else -> skip
          fi
        }
     :: else -> skip
     fi
  :: else -> skip
  fi
}

#if SERVERS == 2

/* heartbeat_step for server s's beat (inflight = its committed(now)),
 * target ctg. */
inline beat(s) {
  res = DEADP(s, 0);
  for (c1 : 0 .. CLIENTS - 1) { res = res + OWN(s, c1, 0) };
  fresh = 1 - ron[s];
  if
  :: fresh -> rsh[s] = 0; rhold[s] = 0
  :: else -> skip
  fi;
  /* Every grant issued was applied: the reserve falls back to it. */
  if
  :: up[s] || fresh -> rhold[s] = rsh[s]
  :: else -> skip
  fi;
  rinf[s] = res;
  rexp[s] = LEASE;
  ron[s] = 1;
  /* The other live rows' reserves: the peer's, and every previous
   * incarnation's (this server's own included: another node id). */
  res = 0;
  for (s1 : 0 .. SERVERS - 1) {
    if
    :: s1 != s && ron[s1] -> res = res + RESERVE(s1)
    :: else -> skip
    fi;
    if
    :: gon[s1] -> res = res + gres[s1]
    :: else -> skip
    fi
  };
  grant = LIMIT - res;
  grant = MIN2(ctg, grant);
  grant = MAX2(grant, 0);
  /* A new generation: unacknowledged until applied. */
  if
  :: fresh || grant != rsh[s] ->
     rsh[s] = grant;
     up[s] = 0;
     rhold[s] = MAX2(rhold[s], grant)
  :: else -> skip
  fi
}

/* A beat of server s: the target ctg and whether the reply is lost
 * (rlost) are chosen first; its reply (the grant, and the lease from now)
 * is applied at once, or lost. */
#define BEAT(s) \
  :: atomic { \
       true -> \
       PICK(ctg, LIMIT); \
       if :: rlost = 0 :: rlost = 1 fi; \
       d_step { \
         beat(s); \
         if \
         :: !rlost -> sh[s] = rsh[s]; ls[s] = LEASE; up[s] = 1 \
         :: else -> skip \
         fi; \
         printf("Beat(%d, target %d, reply lost %d): granted %d;", s, ctg, \
                rlost, rsh[s]); \
         canon(); print_state(); \
         ctg = 0; rlost = 0; fresh = 0; res = 0; grant = 0 \
       } \
     }

#ifdef GHOST
#define GHOST_ADD(s, v, j) GDEAD(s, j) = GDEAD(s, j) + v
#else
#define GHOST_ADD(s, v, j) skip
#endif

/* The server restarts as a new incarnation (a new node id): its old row
 * is another node's now. -DSAME_ID: it restarts under the same node id,
 * so its next beat (applied generation 0, inflight 0) updates the old
 * row. */
#ifdef SAME_ID
#define NEW_INCARNATION(s) skip
#else
#define NEW_INCARNATION(s) \
       if \
       :: ron[s] -> gon[s] = 1; gres[s] = RESERVE(s); gexp[s] = rexp[s] \
       :: else -> skip \
       fi; \
       ron[s] = 0; rsh[s] = 0; rhold[s] = 0; rinf[s] = 0; rexp[s] = 0
#endif
#define CRASH(s) \
  :: d_step { \
       gon[s] == 0 -> \
       NEW_INCARNATION(s); \
       up[s] = 0; sh[s] = 0; ls[s] = 0; \
       for (j1 : 0 .. SPAN - 1) { \
         GHOST_ADD(s, DEADP(s, j1), j1); \
         DEADP(s, j1) = 0 \
       }; \
       for (c1 : 0 .. CLIENTS - 1) { \
         for (j1 : 0 .. SPAN - 1) { \
           GHOST_ADD(s, OWN(s, c1, j1), j1); \
           OWN(s, c1, j1) = 0 \
         }; \
         LON(s, c1) = 0; LT(s, c1) = 0; LAGE(s, c1) = 0; \
         if \
         :: st[c1] == s + 1 -> st[c1] = (ql[c1] > 0 -> DEAD : 0) \
         :: else -> skip \
         fi \
       }; \
       printf("Crash(%d):", s); canon(); print_state() \
     }

#define FLEET(s) BEAT(s) CRASH(s)
#else
#define FLEET(s)
#endif

#if defined(NO_ENVOY) && defined(NO_BREAK)
#define CLIENT(c) CONNECT(c, 0) CONNECT_SECOND(c)
#elif defined(NO_ENVOY)
#define CLIENT(c) BREAK(c) CONNECT(c, 0) CONNECT_SECOND(c)
#else
#define CLIENT(c) ADMIT(c) DELIVER(c) LOSE(c) BREAK(c) \
  CONNECT(c, 0) CONNECT_SECOND(c) OLD_STREAM(c)
#endif
#if SERVERS == 2
#define CONNECT_SECOND(c) CONNECT(c, 1)
#else
#define CONNECT_SECOND(c)
#endif

active proctype Rlqs() {
end:
  do
  :: d_step {
       tick();
       printf("Tick:"); canon(); print_state()
     }
  /* Tick, and a window starts as the next tick begins. */
  :: d_step {
       BOUND_ON && (mon == 0 || me == WINDOW) ->
       tick();
       mon = 1; mA = 0; me = 0;
       printf("Tick, a window starts:"); canon(); print_state()
     }
  ASSIGN(0)
#if SERVERS == 2
  ASSIGN(1)
#endif
  FLEET(0)
#if SERVERS == 2
  FLEET(1)
#endif
  CLIENT(0)
#if CLIENTS == 2
  CLIENT(1)
#endif
  od
}
