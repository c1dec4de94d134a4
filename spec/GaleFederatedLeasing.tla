-------------------------- MODULE GaleFederatedLeasing --------------------------
(* Federation: one global budget of Limit credits per window, shared by     *)
(* Regions regions. A coordinator holds the window's remaining budget; a    *)
(* region whose balance is empty takes one coalesced lease of               *)
(* min(Batch, budget) credits and spends them locally. Credits are          *)
(* window-coupled: they die with the window that granted them, so every     *)
(* admission of a window is paid from that window's budget and the fleet    *)
(* admits at most Limit per window, whatever the number of regions. With    *)
(* WithReconcile a region may give its leftover back within the window      *)
(* (e.g. on close); a reconcile of a rolled window is forfeited.            *)
(*                                                                          *)
(* Abstracted: every step is atomic. A lease is granted and lands in one    *)
(* step, in the window that granted it, so a grant landing after its        *)
(* window rolled is never added to a region's balance; production           *)
(* guarantees this by window coupling (a grant carries its window's start   *)
(* and end, and its credits are spent only before that end). Likewise a     *)
(* reconcile is applied only to the window it names (the coordinator        *)
(* forfeits the leftover of any other window) and at most once per window   *)
(* and token; here Roll zeroes every balance, so nothing of a rolled window *)
(* is left to give back. Cost-1 requests on one key, one shared clock.      *)
(*                                                                          *)
(* Reachable states, spin's "states, stored" for                            *)
(* spec/promela/GaleFederatedLeasing.pml: (Regions, Limit, Batch) =         *)
(* (2, 4, 2), (3, 6, 3), (5, 10, 2) give 8, 27, 112, and with Reconcile 12, *)
(* 43, 192. Without Reconcile this is GaleWindowCoupledLeasing's graph;     *)
(* carried credits (DistributedLeasing) give 31, 441, 992 for the same      *)
(* constants. The BFS twin, tests/model/federated_bfs_test.cc, drives the   *)
(* production federated limiter over this state space.                      *)
EXTENDS Naturals, FiniteSets

CONSTANTS Regions, Limit, Batch, WithReconcile
ASSUME /\ Regions \in Nat \ {0} /\ Limit \in Nat \ {0} /\ Batch \in 1..Limit
       /\ WithReconcile \in BOOLEAN

R == 1..Regions
VARIABLES budget,    \* the coordinator's credits left in the current window
          balance,   \* balance[r]: credits region r holds (window-coupled)
          admitted   \* admissions since the current window began

vars == <<budget, balance, admitted>>

Min(a, b) == IF a < b THEN a ELSE b

Init == /\ budget = Limit
        /\ balance = [r \in R |-> 0]
        /\ admitted = 0

\* A request at region r served from its balance.
Serve(r) == /\ balance[r] > 0
            /\ balance' = [balance EXCEPT ![r] = @ - 1]
            /\ admitted' = admitted + 1
            /\ UNCHANGED budget

\* A request at an empty region r: one coalesced coordinator lease of the
\* batch, and the request that missed spends from it.
LeaseAndServe(r) == /\ balance[r] = 0
                    /\ budget > 0
                    /\ LET g == Min(Batch, budget)
                       IN /\ budget' = budget - g
                          /\ balance' = [balance EXCEPT ![r] = g - 1]
                    /\ admitted' = admitted + 1

\* The window ends: a fresh budget, and every region's credits die with it
\* (a reconcile of the rolled window is forfeited).
Roll == /\ budget' = Limit
        /\ balance' = [r \in R |-> 0]
        /\ admitted' = 0

\* Region r gives its leftover back within the window (e.g. on close).
Reconcile(r) == /\ WithReconcile
                /\ balance[r] > 0
                /\ budget' = Min(Limit, budget + balance[r])
                /\ balance' = [balance EXCEPT ![r] = 0]
                /\ UNCHANGED admitted

Next == \/ \E r \in R : Serve(r) \/ LeaseAndServe(r) \/ Reconcile(r)
        \/ Roll

Spec == Init /\ [][Next]_vars

TypeOK == /\ budget \in 0..Limit
          /\ balance \in [R -> 0..(Batch - 1)]
          /\ admitted \in 0..Limit

\* Conservation: what was admitted plus what the coordinator and the regions
\* still hold is exactly the window's budget. (So the Min in Reconcile never
\* binds: budget + balance[r] <= Limit - admitted.)
Conservation == admitted + budget + (LET S[k \in 0..Regions] ==
                                          IF k = 0 THEN 0
                                          ELSE S[k - 1] + balance[k]
                                      IN S[Regions]) = Limit

\* The headline bound: at most Limit admissions per window, any number of
\* regions.
FederatedBound == admitted <= Limit
=============================================================================
