--------------------------- MODULE GaleHeartbeatLeasing ---------------------------
(* Distributed adaptive concurrency, the coordinator's occupancy cap with   *)
(* synchronous reports (docs/distributed_concurrency.md). Every node runs   *)
(* its own limiter with local limit L (all equal here, so the aggregate is *)
(* L whatever the rule); a coordinator step (Reallocate) grants one node   *)
(* its share: the equal split of L over the active nodes (floor, the       *)
(* remainder one each to the lowest ids, as heartbeat_core.h), capped by   *)
(* what the other nodes reserve, max(share, inflight). Nodes join with     *)
(* share 0, leave (are evicted: their share and their in-flight work are   *)
(* gone) while another stays, and acquire only below their share.          *)
(*                                                                          *)
(* Proves SharesCap (sum share <= L) and InflightCap (sum inflight <= L);   *)
(* the Tight invariants (<= L - 1) are violated, so L is the least bound.  *)
(* With ShareOnlyCap = TRUE the cap reserves the share alone, and           *)
(* InflightCap is violated: a node lowered below its in-flight has its     *)
(* excess granted again (peak 1.5 L for two nodes).                        *)
(*                                                                          *)
(* The BFS twin, tests/model/heartbeat_bfs_test.cc, runs Reallocate through *)
(* the production heartbeat_step: 76 states for Nodes = 2, L = 4 (64 with  *)
(* the share-only cap), the original's counts; spin checks the Promela      *)
(* rendering, spec/promela/GaleHeartbeatLeasing.pml.                        *)
EXTENDS Naturals, FiniteSets

CONSTANTS Nodes, L, ShareOnlyCap
ASSUME Nodes \in Nat \ {0} /\ L \in Nat \ {0} /\ ShareOnlyCap \in BOOLEAN

N == 1..Nodes
VARIABLES active, share, inflight
vars == <<active, share, inflight>>

Max(a, b) == IF a > b THEN a ELSE b
Min(a, b) == IF a < b THEN a ELSE b

RECURSIVE SumOver(_, _)
SumOver(f, S) == IF S = {} THEN 0
                 ELSE LET x == CHOOSE y \in S : TRUE
                      IN f[x] + SumOver(f, S \ {x})

Reserve(m) == IF ShareOnlyCap THEN share[m] ELSE Max(share[m], inflight[m])
Reserved(n) == SumOver([m \in N |-> IF m \in active /\ m # n
                                    THEN Reserve(m) ELSE 0], N)

\* floor(L / |active|), plus one for the (L mod |active|) lowest ids.
Rank(n) == Cardinality({m \in active : m < n})
Target(n) == L \div Cardinality(active)
             + (IF Rank(n) < L % Cardinality(active) THEN 1 ELSE 0)

Init == /\ active = N
        /\ share = [i \in N |-> 0]
        /\ inflight = [i \in N |-> 0]

Reallocate(n) == /\ n \in active
                 /\ share' = [share EXCEPT ![n] =
                                Max(0, Min(Target(n), L - Reserved(n)))]
                 /\ UNCHANGED <<active, inflight>>

Join(n) == /\ n \notin active
           /\ active' = active \cup {n}
           /\ share' = [share EXCEPT ![n] = 0]
           /\ UNCHANGED inflight

Leave(n) == /\ n \in active
            /\ Cardinality(active) > 1
            /\ active' = active \ {n}
            /\ share' = [share EXCEPT ![n] = 0]
            /\ inflight' = [inflight EXCEPT ![n] = 0]

Acquire(n) == /\ n \in active
              /\ inflight[n] < share[n]
              /\ inflight' = [inflight EXCEPT ![n] = @ + 1]
              /\ UNCHANGED <<active, share>>

Release(n) == /\ inflight[n] > 0
              /\ inflight' = [inflight EXCEPT ![n] = @ - 1]
              /\ UNCHANGED <<active, share>>

Next == \E n \in N : \/ Reallocate(n) \/ Join(n) \/ Leave(n)
                     \/ Acquire(n) \/ Release(n)

Spec == Init /\ [][Next]_vars

TypeOK == /\ active \subseteq N /\ active # {}
          /\ share \in [N -> 0..L]
          /\ inflight \in [N -> 0..L]

SharesCap == SumOver(share, N) <= L
InflightCap == SumOver(inflight, N) <= L

\* Violated: L is reached, so it is the least bound.
SharesCapTight == SumOver(share, N) <= L - 1
InflightCapTight == SumOver(inflight, N) <= L - 1
=============================================================================
