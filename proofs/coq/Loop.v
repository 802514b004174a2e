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

(* [i = e0] and [e0 = i] as tests of the index [i]: true at [iv] only. *)
Lemma eqb_at (iv : Z) : forall i, Z.eqb i iv = true <-> i = iv.
Proof. intros; apply Z.eqb_eq. Qed.

Lemma eqb_at_sym (iv : Z) : forall i, Z.eqb iv i = true <-> i = iv.
Proof. intros; rewrite Z.eqb_eq; split; intros; subst; reflexivity. Qed.

(* ifold-single and its twin: the loop changes its state at [e0] only
   (loop_single). [t] is the test at the index, [Ht] says where it holds;
   [zt] is the initial state's term, [f] the body's [e1]. *)
Ltac single t Ht zt f :=
  match goal with
  | H : exists _ _, _ |- _ =>
      let iv := fresh "iv" in let nv := fresh "nv" in let zv := fresh "zv" in
      let He0 := fresh "He0" in let Hn := fresh "Hn" in let Hb := fresh "Hb" in
      destruct H as (iv & nv & He0 & Hn & Hb);
      sem; rewrite He0, Hn; simpl;
      destruct zt as [zv |]; [| reflexivity];
      unfold ifold_sem; destruct (Z.ltb_spec nv 0); [lia |];
      apply (loop_single (t iv) iv nv f zv); [exact Hb | apply Ht]
  end.

(* ifold-single-guarded and its twin: in bounds as above; out of bounds
   the test never holds and the loop returns its state (loop_fixed).
   [e] is the index's term, [zt] and [nt] the loop's operands. *)
Ltac single_guarded t Ht e zt nt f :=
  let Hl := fresh "Hl" in
  sem; intros ? Hl;
  destruct e as [jv |]; [| congruence];
  destruct zt as [zv |]; [| discriminate];
  destruct nt as [nv |]; [| discriminate];
  simpl in *; unfold ifold_sem in Hl; destruct (Z.ltb_spec nv 0); [discriminate |];
  destruct (Z.leb_spec 0 jv); destruct (Z.ltb_spec jv nv); simpl;
    first
      [ rewrite (loop_single (t jv) jv nv f zv) in Hl; [exact Hl | lia | apply Ht]
      | rewrite loop_fixed in Hl;
        [ congruence
        | intros i Hi; apply in_indices in Hi; simpl;
          destruct (t jv i) eqn:E; [apply Ht in E; lia | reflexivity] ] ].

Theorem ifold_single_holds : ifold_single.
Proof.
  unfold ifold_single; intros.
  single (fun iv i => Z.eqb i iv) eqb_at (z i_env a_env) e1.
Qed.

Theorem ifold_single_sym_holds : ifold_single_sym.
Proof.
  unfold ifold_single_sym; intros.
  single (fun iv i => Z.eqb iv i) eqb_at_sym (z i_env a_env) e1.
Qed.

Theorem ifold_single_guarded_holds : ifold_single_guarded.
Proof.
  unfold ifold_single_guarded; intros.
  single_guarded (fun jv i => Z.eqb i jv) eqb_at e0 (z i_env a_env) (n i_env a_env) e1.
Qed.

Theorem ifold_single_guarded_sym_holds : ifold_single_guarded_sym.
Proof.
  unfold ifold_single_guarded_sym; intros.
  single_guarded (fun jv i => Z.eqb jv i) eqb_at_sym e0 (z i_env a_env) (n i_env a_env) e1.
Qed.
