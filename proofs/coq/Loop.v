(* The `loop` rules (rewrite-rules/loop.rules): loop normalisation for `ifold` and `while`.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem ifold_zero_holds : ifold_zero.
Proof. unfold ifold_zero; by_cases. Qed.

Theorem ifold_unchanged_holds : ifold_unchanged.
Proof. unfold ifold_unchanged; by_cases. Qed.

Theorem ifold_unswitch_holds : ifold_unswitch.
Proof. unfold ifold_unswitch; by_cases. Qed.

Theorem while_false_holds : while_false.
Proof. unfold while_false; by_cases. Qed.

Theorem ifold_single_holds : ifold_single.
Proof.
  unfold ifold_single; intros * (iv & nv & He0 & Hn & Hb); sem.
  rewrite He0, Hn; simpl.
  destruct (z i_env a_env) as [zv |]; [| reflexivity].
  unfold ifold_sem; destruct (Z.ltb_spec nv 0); [lia |].
  apply (loop_single (fun i => Z.eqb i iv) iv nv e1 zv); [exact Hb | intros; apply Z.eqb_eq].
Qed.

Theorem ifold_single_sym_holds : ifold_single_sym.
Proof.
  unfold ifold_single_sym; intros * (iv & nv & He0 & Hn & Hb); sem.
  rewrite He0, Hn; simpl.
  destruct (z i_env a_env) as [zv |]; [| reflexivity].
  unfold ifold_sem; destruct (Z.ltb_spec nv 0); [lia |].
  apply (loop_single (fun i => Z.eqb iv i) iv nv e1 zv); [exact Hb |].
  intros; rewrite Z.eqb_eq; split; intros; subst; reflexivity.
Qed.

Theorem ifold_single_guarded_holds : ifold_single_guarded.
Proof.
  unfold ifold_single_guarded; intros * He0; sem; intros v H.
  destruct e0 as [jv |]; [| congruence].
  destruct (z i_env a_env) as [zv |]; [| discriminate].
  destruct (n i_env a_env) as [nv |]; [| discriminate].
  simpl in *; unfold ifold_sem in H; destruct (Z.ltb_spec nv 0); [discriminate |].
  destruct (Z.leb_spec 0 jv); destruct (Z.ltb_spec jv nv); simpl;
    first
      [ rewrite (loop_single (fun i => Z.eqb i jv) jv nv e1 zv) in H;
        [exact H | lia | intros; apply Z.eqb_eq]
      | rewrite loop_fixed in H;
        [ congruence
        | intros i Hi; apply in_indices in Hi; simpl;
          destruct (Z.eqb_spec i jv); [lia | reflexivity] ] ].
Qed.

Theorem ifold_single_guarded_sym_holds : ifold_single_guarded_sym.
Proof.
  unfold ifold_single_guarded_sym; intros * He0; sem; intros v H.
  destruct e0 as [jv |]; [| congruence].
  destruct (z i_env a_env) as [zv |]; [| discriminate].
  destruct (n i_env a_env) as [nv |]; [| discriminate].
  simpl in *; unfold ifold_sem in H; destruct (Z.ltb_spec nv 0); [discriminate |].
  destruct (Z.leb_spec 0 jv); destruct (Z.ltb_spec jv nv); simpl;
    first
      [ rewrite (loop_single (fun i => Z.eqb jv i) jv nv e1 zv) in H;
        [exact H | lia | intros; rewrite Z.eqb_eq; split; intros; subst; reflexivity]
      | rewrite loop_fixed in H;
        [ congruence
        | intros i Hi; apply in_indices in Hi; simpl;
          destruct (Z.eqb_spec jv i); [lia | reflexivity] ] ].
Qed.
