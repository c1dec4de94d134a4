--------------------------- MODULE RlqsAssignment ---------------------------
(* The quota door's assignment protocol (docs/rlqs.md, "The design of      *)
(* QuotaBudget" and "The bound"; docs/formal_model.md, "The quota door").  *)
(* One budget of Limit tokens per fill interval of Fill ticks, split by    *)
(* the quota servers among Envoys that enforce token buckets locally;      *)
(* assignments carry a TTL and are never acknowledged. Checked by spin     *)
(* from spec/promela/RlqsAssignment.pml, which renders this action for     *)
(* action (clients and servers numbered from 0 there, from 1 here); TLC   *)
(* is not run here.                                                        *)
(*                                                                          *)
(* Time is in ticks, each an instant: any number of steps happen in it,    *)
(* then Tick moves on. Every time is held relative to now (ages, lives,    *)
(* ticks left), so the state space is finite and closed under time.        *)
(*                                                                          *)
(* Envoy (A2): nothing, DENY_ALL or one token bucket installed, dropped    *)
(* Ttl ticks after it arrived. The bucket is its fill ratio in units of    *)
(* 1/Units (tokens = ratio * T / Units; Units a multiple of Fill and of    *)
(* 1..Limit, so every step is exact): a first bucket (or one after         *)
(* DENY_ALL or an expiry) starts full, an identical one keeps the running  *)
(* bucket, a changed one keeps the ratio. The network (A1): a FIFO queue   *)
(* per stream; a response is delivered or lost, and lost if not delivered  *)
(* within Slack ticks or sent to a full queue; a break lets what is in     *)
(* flight still arrive, a new stream loses it. The server: QuotaBudget's   *)
(* assign, its records kept as staircases own[s, c][j] = committed_c(now + *)
(* j), j < Span = Ttl + Slack, retired and forgotten ones summed in        *)
(* dead[s]. The fleet (Servers = 2, the design being built): each          *)
(* server's share is its grant from the heartbeat coordinator in handoff   *)
(* mode (heartbeat_core.h); it self-fences, holding its clients while    *)
(* fenced (QuotaBudget::hold); a crash restarts it under a new node id.    *)
(*                                                                          *)
(* Invariants: Bound (the admissions in every window of I <= Window ticks  *)
(* are at most R*I/F + R + R*(floor(I/L) + 1), L = Span), Installed (the   *)
(* Envoys' bucket capacities sum to at most Limit), Committed (so do the   *)
(* servers' commitments, a crashed incarnation's included).                *)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS Limit, Fill, Ttl, Slack, Clients, Servers, QCap, Window, Lease,
          Units
ASSUME /\ Limit \in Nat \ {0} /\ Fill \in Nat \ {0} /\ Ttl \in Nat \ {0}
       /\ Slack \in Nat /\ 2 * Slack <= Ttl      \* QuotaBudget::create
       /\ Clients \in Nat \ {0} /\ Servers \in {1, 2}
       /\ QCap \in Nat \ {0} /\ Window \in Nat /\ Lease \in Nat \ {0}
       /\ Units % Fill = 0 /\ \A t \in 1..Limit : Units % t = 0

Span == Ttl + Slack
C == 1..Clients
S == 1..Servers
J == 0..(Span - 1)
Dead == Servers + 1          \* st[c]: 0 none, s open to server s, Dead
Max(a, b) == IF a > b THEN a ELSE b
Min(a, b) == IF a < b THEN a ELSE b
RECURSIVE SumOver(_, _)
SumOver(f, X) == IF X = {} THEN 0
                 ELSE LET x == CHOOSE y \in X : TRUE
                      IN f[x] + SumOver(f, X \ {x})
Zero == [j \in J |-> 0]
Shift(f) == [j \in J |-> IF j < Span - 1 THEN f[j + 1] ELSE 0]
Plus(f, g) == [j \in J |-> f[j] + g[j]]
NoLast == [on |-> FALSE, T |-> 0, age |-> 0]
None == [kind |-> "none", T |-> 0, ratio |-> 0, life |-> 0]
NoRow == [on |-> FALSE, share |-> 0, hold |-> 0, inflight |-> 0, exp |-> 0]
NoGhost == [on |-> FALSE, res |-> 0, exp |-> 0]

VARIABLES
  inst,    \* Envoy c: what it has installed
  st,      \* Envoy c: its stream
  q,       \* Envoy c: the responses in flight, <<[T, age]>>, head first
  own,     \* server s, client c: the staircase of c's records
  dead,    \* server s: retired and forgotten records, summed
  last,    \* server s, client c: QuotaBudget's c.last (T, age since sent)
  sh,      \* server s: the share it applied (fleet)
  ls,      \* server s: ticks of lease left (fleet)
  up,      \* server s: it applied its row's newest generation (fleet)
  row,     \* coordinator: server s's current incarnation's row (fleet)
  ghost,   \* coordinator: its previous incarnation's row, until it lapses
  gdead,   \* server s: what its previous incarnations' clients may hold
  win      \* the monitor: a window, its admissions A and its length e
vars == <<inst, st, q, own, dead, last, sh, ls, up, row, ghost, gdead, win>>

Init == /\ inst = [c \in C |-> None]
        /\ st = [c \in C |-> 0]
        /\ q = [c \in C |-> <<>>]
        /\ own = [p \in S \X C |-> Zero]
        /\ dead = [s \in S |-> Zero]
        /\ last = [p \in S \X C |-> NoLast]
        /\ sh = [s \in S |-> 0] /\ ls = [s \in S |-> 0]
        /\ up = [s \in S |-> FALSE]
        /\ row = [s \in S |-> NoRow] /\ ghost = [s \in S |-> NoGhost]
        /\ gdead = [s \in S |-> Zero]
        /\ win = [on |-> FALSE, A |-> 0, e |-> 0]

(***************************************************************************)
(* QuotaBudget::assign(share, now) of server s, with targets tg (any split  *)
(* of the share among its clients) and the raise order `order`. b is the   *)
(* budget as it goes through the call's phases.                             *)
(***************************************************************************)
RECURSIVE Fold(_, _, _)
Fold(Op(_, _), b, cs) == IF cs = <<>> THEN b
                         ELSE Fold(Op, Op(b, Head(cs)), Tail(cs))
Ids == [i \in 1..Clients |-> i]

Send(b, c, t) ==        \* record (t, now + Span), set last, push
  [b EXCEPT !.own[c] = [j \in J |-> Max(@[j], t)],
            !.last[c] = [on |-> TRUE, T |-> t, age |-> 0],
            !.out[c] = Append(@, t),
            !.sent[c] = TRUE]
Retire(b, c) ==         \* its records go on counting; c starts afresh
  [b EXCEPT !.dead = Plus(@, b.own[c]), !.own[c] = Zero, !.last[c] = NoLast]
Held(b, c) == IF b.last[c].on THEN b.last[c].T + 1 ELSE 0

\* Server s's budget at the start of a call, its lapsed assignments
\* retired: an assignment whose refresh could arrive after the Envoy's
\* copy ran out (sent more than Ttl - Slack ago) may have lapsed, and so
\* has one whose record expired (at Slack 0, age = Ttl).
Lapsed(s) ==
  LET Active(c) == st[c] = s
      b0 == [own |-> [c \in C |-> own[s, c]], dead |-> dead[s],
             last |-> [c \in C |-> last[s, c]], out |-> [c \in C |-> <<>>],
             sent |-> [c \in C |-> FALSE], total |-> 0]
      Lapse(b, c) ==
        IF Active(c) /\ b.last[c].on
           /\ (b.last[c].age > Ttl - Slack \/ b.last[c].age >= Ttl + Slack)
        THEN IF b.last[c].T > 0 THEN Retire(b, c)
             ELSE [b EXCEPT !.last[c] = NoLast]
        ELSE b
  IN Fold(Lapse, b0, Ids)

\* QuotaBudget::hold(now) of server s, whose share is fenced: what is in
\* force stays, nothing is raised or refreshed, and a client due for its
\* refresh (or holding nothing) is sent DENY_ALL, retired first.
HoldBudget(s) ==
  LET Active(c) == st[c] = s
      Deny(b, c) ==
        IF Active(c) /\ (~b.last[c].on \/ 2 * b.last[c].age >= Ttl)
        THEN Send(IF b.last[c].on /\ b.last[c].T > 0 THEN Retire(b, c) ELSE b,
                  c, 0)
        ELSE b
  IN Fold(Deny, Lapsed(s), Ids)

AssignBudget(s, share, tg, order) ==
  LET Active(c) == st[c] = s
      b1 == Lapsed(s)
      b1t == [b1 EXCEPT !.total = b1.dead[0]
                                  + SumOver([c \in C |-> b1.own[c][0]], C)]
      \* Lowerings: sent at once; to DENY_ALL, retired first.
      Lower(b, c) ==
        IF Active(c) /\ b.last[c].on /\ tg[c] < b.last[c].T
        THEN Send(IF tg[c] = 0 THEN Retire(b, c) ELSE b, c, tg[c])
        ELSE b
      b2 == Fold(Lower, b1t, Ids)
      \* Raises, holding least first, each capped by what the others'
      \* commitments leave.
      Raise(b, c) ==
        IF Active(c) /\ (~b.last[c].on \/ tg[c] > b.last[c].T)
        THEN LET mine == b.own[c][0]
                 g == Min(Max(share - (b.total - mine), 0), tg[c])
             IN IF b.last[c].on /\ g <= b.last[c].T THEN b
                ELSE [Send(b, c, g) EXCEPT !.total = b.total
                                                     + Max(mine, g) - mine]
        ELSE b
      b3 == Fold(Raise, b2, order)
      \* Refreshes: unchanged for half the TTL.
      Refresh(b, c) ==
        IF Active(c) /\ ~b.sent[c] /\ b.last[c].on /\ 2 * b.last[c].age >= Ttl
        THEN Send(b, c, b.last[c].T)
        ELSE b
  IN [result |-> Fold(Refresh, b3, Ids),
      sorted |-> \A i \in 1..(Clients - 1) :
                   Held(b2, order[i]) <= Held(b2, order[i + 1])]

\* Responses pushed to a full queue are lost.
RECURSIVE Push(_, _)
Push(queue, ts) == IF ts = <<>> THEN queue
                   ELSE Push(IF Len(queue) < QCap
                             THEN Append(queue, [T |-> Head(ts), age |-> 0])
                             ELSE queue, Tail(ts))

\* The share server s assigns with now: with its grant while now + Ttl +
\* Slack is within its lease (self-fencing), 0 otherwise.
Share(s) == IF Servers = 1 THEN Limit
            ELSE IF ls[s] >= Span THEN sh[s] ELSE 0
\* Fenced: the share reads 0 though the share applied is higher.
Fenced(s) == Servers > 1 /\ sh[s] > 0 /\ Share(s) = 0

\* Server s's budget becomes b, and what b sends is pushed.
Apply(s, b) ==
  /\ own' = [p \in S \X C |-> IF p[1] = s THEN b.own[p[2]] ELSE own[p]]
  /\ dead' = [dead EXCEPT ![s] = b.dead]
  /\ last' = [p \in S \X C |-> IF p[1] = s THEN b.last[p[2]] ELSE last[p]]
  /\ q' = [c \in C |-> IF st[c] = s THEN Push(q[c], b.out[c]) ELSE q[c]]

Assign(s, tg, order) ==
  /\ ~Fenced(s)
  /\ \A c \in C : st[c] # s => tg[c] = 0
  /\ SumOver(tg, C) <= Share(s)
  /\ LET r == AssignBudget(s, Share(s), tg, order)
     IN r.sorted /\ Apply(s, r.result)
  /\ UNCHANGED <<inst, st, sh, ls, up, row, ghost, gdead, win>>

Hold(s) ==
  /\ Fenced(s)
  /\ Apply(s, HoldBudget(s))
  /\ UNCHANGED <<inst, st, sh, ls, up, row, ghost, gdead, win>>

(***************************************************************************)
(* The Envoys and the network                                              *)
(***************************************************************************)
\* Clients admit only inside the monitor's window (a run breaking Bound
\* still breaks it with the admissions outside its window dropped).
Admit(c) ==
  /\ win.on /\ inst[c].kind = "bucket" /\ inst[c].ratio * inst[c].T >= Units
  /\ inst' = [inst EXCEPT ![c].ratio = @ - Units \div inst[c].T]
  /\ win' = [win EXCEPT !.A = @ + 1]
  /\ UNCHANGED <<st, q, own, dead, last, sh, ls, up, row, ghost, gdead>>

Install(i, t) ==
  IF t = 0 THEN [kind |-> "deny", T |-> 0, ratio |-> 0, life |-> Ttl]
  ELSE IF i.kind = "bucket"
       THEN [i EXCEPT !.T = t, !.life = Ttl]  \* identical, or ratio kept
       ELSE [kind |-> "bucket", T |-> t, ratio |-> Units, life |-> Ttl]

Pop(c) == /\ q[c] # <<>>
          /\ q' = [q EXCEPT ![c] = Tail(@)]
          /\ st' = IF st[c] = Dead /\ Len(q[c]) = 1
                   THEN [st EXCEPT ![c] = 0] ELSE st

Deliver(c) ==
  /\ Pop(c)
  /\ inst' = [inst EXCEPT ![c] = Install(@, Head(q[c]).T)]
  /\ UNCHANGED <<own, dead, last, sh, ls, up, row, ghost, gdead, win>>

Lose(c) ==
  /\ Pop(c)
  /\ UNCHANGED <<inst, own, dead, last, sh, ls, up, row, ghost, gdead, win>>

\* The stream breaks; its server forgets the client (QuotaBudget::forget:
\* its records count until they expire).
Break(c) ==
  /\ st[c] \in S
  /\ LET s == st[c]
     IN /\ dead' = [dead EXCEPT ![s] = Plus(@, own[s, c])]
        /\ own' = [own EXCEPT ![<<s, c>>] = Zero]
        /\ last' = [last EXCEPT ![<<s, c>>] = NoLast]
  /\ st' = [st EXCEPT ![c] = IF q[c] = <<>> THEN 0 ELSE Dead]
  /\ UNCHANGED <<inst, q, sh, ls, up, row, ghost, gdead, win>>

\* A new stream (a new client of server s); the old one's rest is lost.
Connect(c, s) ==
  /\ st[c] \in {0, Dead}
  /\ st' = [st EXCEPT ![c] = s]
  /\ q' = [q EXCEPT ![c] = <<>>]
  /\ UNCHANGED <<inst, own, dead, last, sh, ls, up, row, ghost, gdead, win>>

(***************************************************************************)
(* Time                                                                    *)
(***************************************************************************)
Age(i) == IF i.kind = "none" THEN i
          ELSE LET r == IF i.kind = "bucket"
                        THEN Min(Units, i.ratio + Units \div Fill) ELSE 0
               IN IF i.life = 1 THEN None
                  ELSE [i EXCEPT !.ratio = r, !.life = @ - 1]
AgeQueue(x) ==          \* older by a tick; past the slack, lost
  LET aged == [k \in 1..Len(x) |-> [x[k] EXCEPT !.age = @ + 1]]
  IN SelectSeq(aged, LAMBDA m : m.age <= Slack)

TickBody(winNext) ==
  /\ LET ended == win.on /\ win.e = Window
         i2 == [c \in C |-> Age(inst[c])]
     IN inst' = [c \in C |-> IF ended /\ i2[c].kind = "bucket"
                             THEN [i2[c] EXCEPT !.ratio = Units] ELSE i2[c]]
  /\ q' = [c \in C |-> AgeQueue(q[c])]
  /\ st' = [c \in C |-> IF st[c] = Dead /\ AgeQueue(q[c]) = <<>>
                        THEN 0 ELSE st[c]]
  /\ own' = [p \in S \X C |-> Shift(own[p])]
  /\ dead' = [s \in S |-> Shift(dead[s])]
  /\ gdead' = [s \in S |-> Shift(gdead[s])]
  /\ last' = [p \in S \X C |->
               IF last[p].on
               THEN [last[p] EXCEPT !.age = Min(@ + 1, Ttl - Slack + 1)]
               ELSE last[p]]
  /\ ls' = [s \in S |-> Max(ls[s] - 1, 0)]
  /\ row' = [s \in S |-> IF row[s].on /\ row[s].exp > 1
                         THEN [row[s] EXCEPT !.exp = @ - 1] ELSE NoRow]
  /\ up' = [s \in S |-> up[s] /\ row[s].on /\ row[s].exp > 1]
  /\ ghost' = [s \in S |-> IF ghost[s].on /\ ghost[s].exp > 1
                           THEN [ghost[s] EXCEPT !.exp = @ - 1] ELSE NoGhost]
  /\ win' = winNext
  /\ UNCHANGED sh

Tick == TickBody(IF win.on /\ win.e < Window
                 THEN [win EXCEPT !.e = @ + 1]
                 ELSE [on |-> FALSE, A |-> 0, e |-> 0])
\* A window starts as the next tick begins.
TickStart == /\ ~win.on \/ win.e = Window
             /\ TickBody([on |-> TRUE, A |-> 0, e |-> 0])

(***************************************************************************)
(* The fleet: the coordinator's step (heartbeat_core.h, handoff mode) and  *)
(* crashes. A row keeps share, hold = max(acked, max_unacked), the         *)
(* reported inflight and its ticks to expiry; up[s] stands for             *)
(* applied_gen >= generation.                                              *)
(***************************************************************************)
Reserve(r) == Max(r.hold, r.inflight)
CommittedOf(s) == dead[s][0] + SumOver([c \in C |-> own[s, c][0]], C)

Beat(s, target, lost) ==
  LET r == row[s]
      fresh == ~r.on
      share0 == IF fresh THEN 0 ELSE r.share
      hold0 == IF fresh \/ up[s] THEN share0 ELSE r.hold
      others == {o \in S : o # s /\ row[o].on}
      reserved == SumOver([o \in others |-> Reserve(row[o])], others)
                  + SumOver([o \in S |-> IF ghost[o].on THEN ghost[o].res
                                         ELSE 0], S)
      g == Max(0, Min(target, Limit - reserved))
      new == fresh \/ g # share0
      r2 == [on |-> TRUE, share |-> IF new THEN g ELSE share0,
             hold |-> IF new THEN Max(hold0, g) ELSE hold0,
             inflight |-> CommittedOf(s), exp |-> Lease]
  IN /\ Servers = 2
     /\ row' = [row EXCEPT ![s] = r2]
     /\ IF lost
        THEN /\ up' = [up EXCEPT ![s] = IF new THEN FALSE ELSE @]
             /\ UNCHANGED <<sh, ls>>
        ELSE /\ sh' = [sh EXCEPT ![s] = r2.share]
             /\ ls' = [ls EXCEPT ![s] = Lease]
             /\ up' = [up EXCEPT ![s] = TRUE]
     /\ UNCHANGED <<inst, st, q, own, dead, last, ghost, gdead, win>>

\* The server restarts at once under a new node id: its old row is another
\* node's until its lease lapses; what its clients may hold stays counted.
Crash(s) ==
  /\ Servers = 2 /\ ~ghost[s].on
  /\ ghost' = [ghost EXCEPT ![s] = IF row[s].on
                 THEN [on |-> TRUE, res |-> Reserve(row[s]),
                       exp |-> row[s].exp]
                 ELSE NoGhost]
  /\ row' = [row EXCEPT ![s] = NoRow]
  /\ up' = [up EXCEPT ![s] = FALSE]
  /\ sh' = [sh EXCEPT ![s] = 0] /\ ls' = [ls EXCEPT ![s] = 0]
  /\ gdead' = [gdead EXCEPT ![s] =
       Plus(Plus(@, dead[s]),
            [j \in J |-> SumOver([c \in C |-> own[s, c][j]], C)])]
  /\ dead' = [dead EXCEPT ![s] = Zero]
  /\ own' = [p \in S \X C |-> IF p[1] = s THEN Zero ELSE own[p]]
  /\ last' = [p \in S \X C |-> IF p[1] = s THEN NoLast ELSE last[p]]
  /\ st' = [c \in C |-> IF st[c] = s
                        THEN IF q[c] = <<>> THEN 0 ELSE Dead
                        ELSE st[c]]
  /\ UNCHANGED <<inst, q, win>>

(***************************************************************************)
(* The specification and its invariants                                    *)
(***************************************************************************)
Orders == {o \in [1..Clients -> C] : \A c \in C : \E i \in 1..Clients :
                                        o[i] = c}
Next ==
  \/ Tick \/ TickStart
  \/ \E s \in S, tg \in [C -> 0..Limit], o \in Orders : Assign(s, tg, o)
  \/ \E s \in S : Hold(s)
  \/ \E c \in C : Admit(c) \/ Deliver(c) \/ Lose(c) \/ Break(c)
  \/ \E c \in C, s \in S : Connect(c, s)
  \/ \E s \in S, t \in 0..Limit, lost \in BOOLEAN : Beat(s, t, lost)
  \/ \E s \in S : Crash(s)

Spec == Init /\ [][Next]_vars

Bound == win.on => Fill * win.A <= Limit * win.e + Fill * Limit
                                   + Fill * Limit * (win.e \div Span + 1)
Installed == SumOver([c \in C |-> IF inst[c].kind = "bucket"
                                  THEN inst[c].T ELSE 0], C) <= Limit
Committed == SumOver([s \in S |-> CommittedOf(s) + gdead[s][0]], S) <= Limit

\* The negative controls of the spin model are edits of one definition
\* each: NO_TTL_ACCOUNTING Send's Max(@[j], t) to t; NO_RETIRE Retire to
\* forgetting only `last`; NO_FENCE Share's ls[s] >= Span to ls[s] > 0;
\* FENCE_SHORT to ls[s] >= Span - 1; SAME_ID Crash keeping row[s] (no
\* ghost); FRESH_ON_CHANGE Install's ratio-keeping branch to a full bucket;
\* LATE_OLD_STREAM Connect keeping the old queue, still deliverable.
=============================================================================
