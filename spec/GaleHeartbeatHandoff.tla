--------------------------- MODULE GaleHeartbeatHandoff ---------------------------
(* Distributed adaptive concurrency under grant and report lag, with       *)
(* acknowledged handoff (docs/distributed_concurrency.md). The coordinator  *)
(* keeps one row per node, exactly production's (heartbeat_core.h): the     *)
(* share last issued, its generation, the acknowledged share, the highest  *)
(* share issued and not acknowledged (maxUnacked), and the node's reported *)
(* in-flight. A node applies a grant only if its generation is newer than  *)
(* the one it applied; grants travel out of order; a node's report is a   *)
(* snapshot (applied generation, in-flight) taken atomically and delivered *)
(* later, while the node keeps admitting below its applied share.          *)
(*                                                                          *)
(* Proves GlobalCap (sum of committed shares <= L) and the hard            *)
(* asynchronous InflightCap (sum of true in-flight <= L). The Tight forms   *)
(* (<= L - 1) are violated. Each reserve term is necessary: Reserve without *)
(* maxUnacked, or without the reported in-flight, refutes InflightCap; the *)
(* default cap, max(share, reported in-flight), lets sum(inflight) reach    *)
(* 1.5 L. A torn snapshot (in-flight read before the generation) refutes   *)
(* it too.                                                                  *)
(*                                                                          *)
(* Generations are bounded by K per node (the history bound). The BFS twin, *)
(* tests/model/heartbeat_handoff_bfs_test.cc, runs Report through the       *)
(* production heartbeat_step: 59,346 states for Nodes 2, L 4, K 3. The     *)
(* original's spec keeps the whole grant history (250,624 states); this one *)
(* keeps what production's row keeps, so dead history is trimmed and the   *)
(* invariants are the same.                                                 *)
EXTENDS Naturals, FiniteSets

CONSTANTS Nodes, L, K
ASSUME Nodes \in Nat \ {0} /\ L \in Nat \ {0} /\ K \in Nat \ {0}

N == 1..Nodes
NoRow == [present |-> FALSE, share |-> 0, gen |-> 0, acked |-> 0,
          maxUnacked |-> 0, reported |-> 0]

VARIABLES
  ap,        \* node: generation of the grant applied
  cap,       \* node: the share it admits below
  inflight,  \* node: slots held
  snap,      \* node: the pending snapshot, or [pending |-> FALSE]
  chan,      \* node: grants issued and not delivered, a set of <<gen, share>>
  row        \* coordinator: the node's row
vars == <<ap, cap, inflight, snap, chan, row>>

Max(a, b) == IF a > b THEN a ELSE b
Min(a, b) == IF a < b THEN a ELSE b
Max3(a, b, c) == Max(a, Max(b, c))

RECURSIVE SumOver(_, _)
SumOver(f, S) == IF S = {} THEN 0
                 ELSE LET x == CHOOSE y \in S : TRUE
                      IN f[x] + SumOver(f, S \ {x})

Live(r) == {m \in N : r[m].present}
Reserve(r, m) == Max3(r[m].acked, r[m].maxUnacked, r[m].reported)
Rank(r, n) == Cardinality({m \in Live(r) : m < n})
Target(r, n) == L \div Cardinality(Live(r))
                + (IF Rank(r, n) < L % Cardinality(Live(r)) THEN 1 ELSE 0)

Init == /\ ap = [n \in N |-> 0]
        /\ cap = [n \in N |-> 0]
        /\ inflight = [n \in N |-> 0]
        /\ snap = [n \in N |-> [pending |-> FALSE, ap |-> 0, inflight |-> 0]]
        /\ chan = [n \in N |-> {}]
        /\ row = [n \in N |-> NoRow]

Acquire(n) == /\ inflight[n] < cap[n]
              /\ inflight' = [inflight EXCEPT ![n] = @ + 1]
              /\ UNCHANGED <<ap, cap, snap, chan, row>>

Release(n) == /\ inflight[n] > 0
              /\ inflight' = [inflight EXCEPT ![n] = @ - 1]
              /\ UNCHANGED <<ap, cap, snap, chan, row>>

\* One atomic snapshot of the node (DistributedConcurrency reads the applied
\* generation, then in-flight, under its beat lock).
Snapshot(n) == /\ ~snap[n].pending
               /\ snap' = [snap EXCEPT ![n] = [pending |-> TRUE,
                                               ap |-> ap[n],
                                               inflight |-> inflight[n]]]
               /\ UNCHANGED <<ap, cap, inflight, chan, row>>

\* The coordinator's step for n's snapshot (heartbeat_step, steps 1, 5, 6).
Report(n) ==
  /\ snap[n].pending
  /\ LET fresh == ~row[n].present
         g0 == Max(row[n].gen, snap[n].ap)
         allAcked == snap[n].ap >= g0
         r1 == [row EXCEPT ![n] = [present |-> TRUE,
                                   share |-> row[n].share,
                                   gen |-> g0,
                                   acked |-> IF allAcked THEN row[n].share
                                             ELSE row[n].acked,
                                   maxUnacked |-> IF allAcked THEN 0
                                                  ELSE row[n].maxUnacked,
                                   reported |-> snap[n].inflight]]
         others == SumOver([m \in N |-> IF m \in Live(r1) /\ m # n
                                        THEN Reserve(r1, m) ELSE 0], N)
         s == Max(0, Min(Target(r1, n), L - others))
         issue == fresh \/ s # r1[n].share
         g1 == g0 + 1
     IN /\ issue => g1 <= K
        /\ row' = IF issue
                  THEN [r1 EXCEPT ![n].share = s, ![n].gen = g1,
                                  ![n].maxUnacked =
                                    IF g1 > snap[n].ap THEN Max(@, s) ELSE @]
                  ELSE r1
        /\ chan' = IF issue THEN [chan EXCEPT ![n] = @ \cup {<<g1, s>>}]
                   ELSE chan
  /\ snap' = [snap EXCEPT ![n] = [pending |-> FALSE, ap |-> 0, inflight |-> 0]]
  /\ UNCHANGED <<ap, cap, inflight>>

\* A grant reaches n, in any order: applied only if newer.
Deliver(n) == \E m \in chan[n] :
  /\ chan' = [chan EXCEPT ![n] = @ \ {m}]
  /\ IF m[1] > ap[n]
     THEN /\ ap' = [ap EXCEPT ![n] = m[1]]
          /\ cap' = [cap EXCEPT ![n] = m[2]]
     ELSE UNCHANGED <<ap, cap>>
  /\ UNCHANGED <<inflight, snap, row>>

Next == \E n \in N : \/ Acquire(n) \/ Release(n) \/ Snapshot(n)
                     \/ Report(n) \/ Deliver(n)

Spec == Init /\ [][Next]_vars

GlobalCap == SumOver([n \in N |-> row[n].share], N) <= L
InflightCap == SumOver(inflight, N) <= L
GlobalCapTight == SumOver([n \in N |-> row[n].share], N) <= L - 1
InflightCapTight == SumOver(inflight, N) <= L - 1
=============================================================================
