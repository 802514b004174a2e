(* The `tuple` rules (rewrite-rules/tuple.rules): tuple normalisation.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem fst_pair_holds : fst_pair.
Proof. unfold fst_pair; by_cases. Qed.

Theorem snd_pair_holds : snd_pair.
Proof. unfold snd_pair; by_cases. Qed.

Theorem fst_if_holds : fst_if.
Proof. unfold fst_if; by_cases. Qed.

Theorem snd_if_holds : snd_if.
Proof. unfold snd_if; by_cases. Qed.
