(* The `fusion` rules (rewrite-rules/fusion.rules): fusion of `build` with `get` and `length`.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem get_of_build_holds : get_of_build.
Proof. unfold get_of_build; by_cases. Qed.

Theorem length_of_build_holds : length_of_build.
Proof. unfold length_of_build; by_cases. Qed.
