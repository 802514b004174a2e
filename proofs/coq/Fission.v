(* The `fission` rules (rewrite-rules/fission.rules): loop fission under a projection, and one-hot tangent states.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

(* The left side's loop, its state projected by [R], follows the right
   side's loop [h] from [t] (ifold_refine); the step is left to prove. *)
Ltac fission_by R h t :=
  simpl in *;
  match goal with
  | H : match ifold_sem ?g ?z ?n with _ => _ end = Some _ |- _ =>
      let p := fresh "p" in
      let E := fresh "E" in
      destruct (ifold_sem g z n) as [p |] eqn:E; [| discriminate];
      injection H as <-;
      destruct (ifold_refine R g h z t n eq_refl) with (v := p) as (w & Hw & Hr);
      [| exact E | rewrite Hw, Hr; reflexivity];
      intros [s1 s2] st i s' Hst Hstep; simpl in *; subst
  end.

Theorem fission_fst_holds : fission_fst.
Proof.
  unfold fission_fst; split; intros; sem; intros v H.
  - (* ?i = ?a: b0 reads nothing of the state *)
    destruct (z0 a_env) as [x0 |]; [| discriminate].
    destruct z1 as [x1 |]; [| discriminate].
    destruct (n a_env) as [nv |]; [| discriminate].
    fission_by (fun (a : T1 * T2) (s : T1) => fst a = s) (fun s : T1 => Some (fun _ : Z => b0)) x0.
    destruct b0 as [y |]; [| discriminate].
    destruct (b1 i); [| discriminate].
    injection Hstep as <-; exists y; split; reflexivity.
  - destruct (z0 i_env a_env) as [x0 |]; [| discriminate].
    destruct (z1 a_env) as [x1 |]; [| discriminate].
    destruct (n i_env a_env) as [nv |]; [| discriminate].
    fission_by (fun (a : T1 * T2) (s : T1) => fst a = s) (fun s => Some (fun i => b0 i s)) x0.
    destruct (b0 i st) as [y |]; [| discriminate].
    destruct (b1 i (st, s2)); [| discriminate].
    injection Hstep as <-; exists y; split; reflexivity.
Qed.

Theorem fission_snd_holds : fission_snd.
Proof.
  unfold fission_snd; split; intros; sem; intros v H.
  - (* ?i = ?a: b1 reads nothing of the state *)
    destruct z0 as [x0 |]; [| discriminate].
    destruct (z1 a_env) as [x1 |]; [| discriminate].
    destruct (n a_env) as [nv |]; [| discriminate].
    fission_by (fun (a : T1 * T2) (s : T2) => snd a = s) (fun s : T2 => Some (fun _ : Z => b1)) x1.
    destruct (b0 i); [| discriminate].
    destruct b1 as [y |]; [| discriminate].
    injection Hstep as <-; exists y; split; reflexivity.
  - destruct (z0 a_env) as [x0 |]; [| discriminate].
    destruct (z1 i_env a_env) as [x1 |]; [| discriminate].
    destruct (n i_env a_env) as [nv |]; [| discriminate].
    fission_by (fun (a : T1 * T2) (s : T2) => snd a = s) (fun s => Some (fun i => b1 i s)) x1.
    destruct (b0 i (s1, st)); [| discriminate].
    destruct (b1 i st) as [y |]; [| discriminate].
    injection Hstep as <-; exists y; split; reflexivity.
Qed.

Theorem ifold_onehot_holds : ifold_onehot.
Proof.
  unfold ifold_onehot; intros; sem.
  destruct i as [iv |].
  2: { destruct (a0 s_env j_env), (k0 s_env j_env), (n s_env j_env); simpl; try reflexivity.
       match goal with |- context [ifold_sem ?g ?s ?m] => destruct (ifold_sem g s m) end; reflexivity. }
  destruct (a0 s_env j_env) as [x0 |]; [| reflexivity].
  destruct (k0 s_env j_env) as [kv0 |]; simpl; [| reflexivity].
  destruct (n s_env j_env) as [nv |]; simpl; [| destruct (eq1 kv0 iv); reflexivity].
  unfold ifold_sem; destruct (nv <? 0); [destruct (eq1 kv0 iv); reflexivity |].
  set (oh := fun kv => if eq1 kv iv then lit1 else lit2).
  destruct (eq1 kv0 iv) eqn:Ek; simpl.
  all: match goal with |- context [loop ?h ?t0 ?is] =>
       match goal with |- context [loop ?g ?s0 is] =>
         tryif constr_eq g h then fail else
         destruct (loop_sim (fun l r => fst l = fst r /\ snd l = oh (snd r)) g h is
                     s0 t0) as [[-> ->] | (l & r & -> & -> & [_ Hr])] end end.
  1, 5: split; [reflexivity | unfold oh; simpl; rewrite Ek; reflexivity].
  1, 4: intros [s1 d] [t1 kv] i [Hf Hs] _; simpl in *; subst;
    simpl;
    destruct (c t1 i) as [[|] |]; simpl; [| right; eexists _, _; eauto | left; auto];
    destruct (a t1 i) as [av |]; simpl; [| left; auto];
    destruct (k t1 i) as [kv' |]; simpl; [| left; auto];
    right; exists (av, oh kv'), (av, kv'); unfold oh; simpl;
    destruct (eq1 kv' iv); repeat split.
  all: try reflexivity.
  all: rewrite Hr; unfold oh; destruct (eq1 (snd r) iv); reflexivity.
Qed.
