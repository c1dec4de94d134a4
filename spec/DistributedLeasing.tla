--------------------------- MODULE DistributedLeasing ---------------------------
(* Leased admission with CARRIED credits (LeasedLimiterOptions::window_coupled *)
(* = false). A store holds a fixed-window budget of Limit credits; each of     *)
(* Nodes nodes leases min(Batch, pool) credits when a request finds it empty *)
(* (the lease and the spend of the request that missed are one step, as in   *)
(* the production miss path) and spends them locally. Credits outlive their  *)
(* window. The BFS twin, tests/model/leasing_bfs_test.cc, searches this      *)
(* state space by driving the production limiters and finds the same graph:  *)
(* 31 states for (Nodes, Limit, Batch) = (2, 4, 2) and 441 for (3, 6, 3).   *)
EXTENDS Naturals, FiniteSets

CONSTANTS Nodes, Limit, Batch
ASSUME Nodes \in Nat \ {0} /\ Limit \in Nat \ {0} /\ Batch \in 1..Limit

N == 1..Nodes
VARIABLES pool,      \* credits the store's current window still holds
          local,     \* local[i]: credits node i holds
          admitted   \* admissions since the current window began

vars == <<pool, local, admitted>>

Min(a, b) == IF a < b THEN a ELSE b

Init == /\ pool = Limit
        /\ local = [i \in N |-> 0]
        /\ admitted = 0

\* A request at node i served from its local credits.
Serve(i) == /\ local[i] > 0
            /\ local' = [local EXCEPT ![i] = @ - 1]
            /\ admitted' = admitted + 1
            /\ UNCHANGED pool

\* A request at an empty node i: one lease, and the request spends from it.
LeaseAndServe(i) == /\ local[i] = 0
                    /\ pool > 0
                    /\ LET g == Min(Batch, pool)
                       IN /\ pool' = pool - g
                          /\ local' = [local EXCEPT ![i] = g - 1]
                    /\ admitted' = admitted + 1

\* The window ends: a fresh budget; carried credits stay.
Roll == /\ pool' = Limit
        /\ admitted' = 0
        /\ UNCHANGED local

Next == \/ \E i \in N : Serve(i) \/ LeaseAndServe(i)
        \/ Roll

Spec == Init /\ [][Next]_vars

TypeOK == /\ pool \in 0..Limit
          /\ local \in [N -> 0..(Batch - 1)]
          /\ admitted \in Nat

\* The carried-credit bound: at most Limit + Nodes * (Batch - 1) per window.
\* Tight: TLC finds a state with equality (check by negating it).
CarriedBound == admitted <= Limit + Nodes * (Batch - 1)
=============================================================================
