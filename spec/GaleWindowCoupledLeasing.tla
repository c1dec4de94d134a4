------------------------ MODULE GaleWindowCoupledLeasing ------------------------
(* Leased admission with WINDOW-COUPLED credits (the default): as           *)
(* DistributedLeasing, except that credits die at the end of the window     *)
(* that granted them (a node spends only while now < reset_at of its        *)
(* grant). Hence every admission of a window is paid from that window's    *)
(* budget and a fleet of any size admits at most Limit per window. The BFS  *)
(* twin, tests/model/leasing_bfs_test.cc, drives the production limiters    *)
(* over this state space: 8, 27 and 112 states for (2, 4, 2), (3, 6, 3)    *)
(* and (5, 10, 2), and max admitted = Limit for Nodes in {1, 2, 4, 8}.      *)
EXTENDS Naturals, FiniteSets

CONSTANTS Nodes, Limit, Batch
ASSUME Nodes \in Nat \ {0} /\ Limit \in Nat \ {0} /\ Batch \in 1..Limit

N == 1..Nodes
VARIABLES pool, local, admitted
vars == <<pool, local, admitted>>

Min(a, b) == IF a < b THEN a ELSE b

Init == /\ pool = Limit
        /\ local = [i \in N |-> 0]
        /\ admitted = 0

Serve(i) == /\ local[i] > 0
            /\ local' = [local EXCEPT ![i] = @ - 1]
            /\ admitted' = admitted + 1
            /\ UNCHANGED pool

LeaseAndServe(i) == /\ local[i] = 0
                    /\ pool > 0
                    /\ LET g == Min(Batch, pool)
                       IN /\ pool' = pool - g
                          /\ local' = [local EXCEPT ![i] = g - 1]
                    /\ admitted' = admitted + 1

\* The window ends: a fresh budget, and every node's credits die with it.
Roll == /\ pool' = Limit
        /\ local' = [i \in N |-> 0]
        /\ admitted' = 0

Next == \/ \E i \in N : Serve(i) \/ LeaseAndServe(i)
        \/ Roll

Spec == Init /\ [][Next]_vars

TypeOK == /\ pool \in 0..Limit
          /\ local \in [N -> 0..(Batch - 1)]
          /\ admitted \in 0..Limit

\* Conservation: what was admitted plus what nodes and the store still hold
\* is exactly the window's budget.
Conservation == admitted + pool + (LET S[k \in 0..Nodes] ==
                                        IF k = 0 THEN 0
                                        ELSE S[k - 1] + local[k]
                                    IN S[Nodes]) = Limit

\* The headline bound: at most Limit admissions per window, any fleet size.
CoupledBound == admitted <= Limit
=============================================================================
