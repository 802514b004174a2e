(* The `lambda` rules (rewrite-rules/lambda.rules): λ and `let` rules and loop-invariant code motion.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem beta_holds : beta.
Proof. unfold beta; by_cases. Qed.

Theorem let_dead_holds : let_dead.
Proof. unfold let_dead; by_cases. Qed.

Theorem let_float_holds : let_float.
Proof. unfold let_float; by_cases. Qed.

Theorem let_cse_holds : let_cse.
Proof. unfold let_cse; by_cases. Qed.

Theorem licm_build_holds : licm_build.
Proof. unfold licm_build; by_cases. Qed.

Theorem licm_ifold_holds : licm_ifold.
Proof. unfold licm_ifold; by_cases. Qed.

Theorem licm_while_holds : licm_while.
Proof. unfold licm_while; by_cases. Qed.

Theorem licm_while_cond_holds : licm_while_cond.
Proof. unfold licm_while_cond; by_cases. Qed.

Theorem licm_build_guarded_holds : licm_build_guarded.
Proof. unfold licm_build_guarded; by_cases. Qed.

Theorem licm_ifold_guarded_holds : licm_ifold_guarded.
Proof. unfold licm_ifold_guarded; by_cases. Qed.
