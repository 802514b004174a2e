(* The Coq statements of the deliberately unsound fixtures of
   tests/data/unsound-rules (generated into Statements.v by `fsmooth rules
   coq --rules tests/data/unsound-rules`) are false: each is refuted by an
   instance, the one `fsmooth rules check` and `rules prove` find. So the
   statements are strong enough to fail where a rule is wrong (capture
   included), and proving a statement is not vacuous. tests/it/coq.rs
   builds this file. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

(* let x = ⊥ in 1 is ⊥, not 1. *)
Theorem unsound_let_dead_refuted : ~ unsound_let_dead.
Proof.
  unfold unsound_let_dead; intros H.
  specialize (H unit unit unit tt (fun _ => None) (Some tt)).
  cbv in H; discriminate H.
Qed.

(* [][0] is ⊥ (index-out-of-bounds), while f 0 is a value. *)
Theorem unsound_get_of_build_refuted : ~ unsound_get_of_build.
Proof.
  unfold unsound_get_of_build; intros H.
  specialize (H unit (Some 0) (Some (fun _ => Some tt)) (Some 0)).
  cbv in H; discriminate H.
Qed.

Theorem boundary_out_of_range_refuted : ~ boundary_out_of_range.
Proof.
  unfold boundary_out_of_range; intros H.
  specialize (H unit (Some 0) (Some (fun _ => Some tt)) (Some 0)).
  assert (Hi : exists iv, Some 0 = Some iv /\ 0 <= iv) by (exists 0; split; [reflexivity | lia]).
  specialize (H Hi); cbv in H; discriminate H.
Qed.

(* At the empty array the left side takes the other branch. *)
Theorem boundary_empty_refuted : ~ boundary_empty.
Proof.
  unfold boundary_empty, refines; intros H.
  specialize (H unit bool (Some []) (Some true) (Some false) true eq_refl).
  discriminate H.
Qed.

(* Capture: with e = y, `let x = y in fun y -> x` is the constant function
   of the outer y, `fun y -> let x = y in x` the identity. *)
Theorem unsound_let_lam_capture_refuted : ~ unsound_let_lam_capture.
Proof.
  unfold unsound_let_lam_capture, refines; intros H.
  specialize (H bool unit bool bool true tt (fun y _ => Some y) (fun _ v => Some v)
                (fun _ => Some true) eq_refl).
  cbv in H; injection H as H.
  apply (f_equal (fun g => g false)) in H; discriminate H.
Qed.
