(* The `cond` rules (rewrite-rules/cond.rules): conditionals, and strict operations distributed over them.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem if_true_holds : if_true.
Proof. unfold if_true; by_cases. Qed.

Theorem if_false_holds : if_false.
Proof. unfold if_false; by_cases. Qed.

Theorem if_same_holds : if_same.
Proof. unfold if_same; by_cases. Qed.

Theorem if_then_same_holds : if_then_same.
Proof. unfold if_then_same; by_cases. Qed.

Theorem if_else_same_holds : if_else_same.
Proof. unfold if_else_same; by_cases. Qed.

Theorem mul_if_holds : mul_if.
Proof. unfold mul_if; by_cases. Qed.

Theorem if_mul_holds : if_mul.
Proof. unfold if_mul; by_cases. Qed.

Theorem add_if_holds : add_if.
Proof. unfold add_if; by_cases. Qed.

Theorem if_add_holds : if_add.
Proof. unfold if_add; by_cases. Qed.

Theorem sub_if_holds : sub_if.
Proof. unfold sub_if; by_cases. Qed.

Theorem if_sub_holds : if_sub.
Proof. unfold if_sub; by_cases. Qed.

Theorem if_div_holds : if_div.
Proof. unfold if_div; by_cases. Qed.

Theorem if_and_holds : if_and.
Proof. unfold if_and; by_cases. Qed.
