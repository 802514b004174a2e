(* The `fission` rules (rewrite-rules/fission.rules): loop fission under a projection, and one-hot tangent states.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem fission_fst_holds : fission_fst.
Proof.
  unfold fission_fst; split.
  - (* ?i = ?a: b0 reads nothing of the state *)
    intros; sem; intros v H.
    destruct (z0 a_env) as [x0 |]; [| discriminate].
    destruct z1 as [x1 |]; [| discriminate].
    destruct (n a_env) as [nv |]; [| discriminate].
    simpl in *.
    match type of H with context [ifold_sem ?g _ _] => set (G := g) in H end.
    destruct (ifold_sem G (x0, x1) nv) as [p |] eqn:E; [| discriminate].
    injection H as <-.
    unfold ifold_sem in *; destruct (nv <? 0); [discriminate |].
    destruct (loop_refine (fun (a : T1 * T2) (s : T1) => fst a = s) G
                (fun s => Some (fun i => b0)) (indices nv) (x0, x1) x0 eq_refl)
      with (v := p) as (w & Hw & Hr).
    + intros [s1 s2] t i s' Hst _ Hstep; subst G; simpl in *; subst.
      destruct b0 as [y |]; [| discriminate].
      destruct (b1 i); [| discriminate].
      injection Hstep as <-; exists y; split; reflexivity.
    + exact E.
    + rewrite Hw, Hr; reflexivity.
  - intros; sem; intros v H.
    destruct (z0 i_env a_env) as [x0 |]; [| discriminate].
    destruct (z1 a_env) as [x1 |]; [| discriminate].
    destruct (n i_env a_env) as [nv |]; [| discriminate].
    simpl in *.
    match type of H with context [ifold_sem ?g _ _] => set (G := g) in H end.
    destruct (ifold_sem G (x0, x1) nv) as [p |] eqn:E; [| discriminate].
    injection H as <-.
    unfold ifold_sem in *; destruct (nv <? 0); [discriminate |].
    destruct (loop_refine (fun (a : T1 * T2) (s : T1) => fst a = s) G
                (fun s => Some (fun i => b0 i s)) (indices nv) (x0, x1) x0 eq_refl)
      with (v := p) as (w & Hw & Hr).
    + intros [s1 s2] t i s' Hst _ Hstep; subst G; simpl in *; subst.
      destruct (b0 i t) as [y |]; [| discriminate].
      destruct (b1 i (t, s2)); [| discriminate].
      injection Hstep as <-; exists y; split; reflexivity.
    + exact E.
    + rewrite Hw, Hr; reflexivity.
Qed.


Theorem fission_snd_holds : fission_snd.
Proof.
  unfold fission_snd; split.
  - (* ?i = ?a: b1 reads nothing of the state *)
    intros; sem; intros v H.
    destruct z0 as [x0 |]; [| discriminate].
    destruct (z1 a_env) as [x1 |]; [| discriminate].
    destruct (n a_env) as [nv |]; [| discriminate].
    simpl in *.
    match type of H with context [ifold_sem ?g _ _] => set (G := g) in H end.
    destruct (ifold_sem G (x0, x1) nv) as [p |] eqn:E; [| discriminate].
    injection H as <-.
    unfold ifold_sem in *; destruct (nv <? 0); [discriminate |].
    destruct (loop_refine (fun (a : T1 * T2) (s : T2) => snd a = s) G
                (fun s => Some (fun i => b1)) (indices nv) (x0, x1) x1 eq_refl)
      with (v := p) as (w & Hw & Hr).
    + intros [s1 s2] t i s' Hst _ Hstep; subst G; simpl in *; subst.
      destruct (b0 i); [| discriminate].
      destruct b1 as [y |]; [| discriminate].
      injection Hstep as <-; exists y; split; reflexivity.
    + exact E.
    + rewrite Hw, Hr; reflexivity.
  - intros; sem; intros v H.
    destruct (z0 a_env) as [x0 |]; [| discriminate].
    destruct (z1 i_env a_env) as [x1 |]; [| discriminate].
    destruct (n i_env a_env) as [nv |]; [| discriminate].
    simpl in *.
    match type of H with context [ifold_sem ?g _ _] => set (G := g) in H end.
    destruct (ifold_sem G (x0, x1) nv) as [p |] eqn:E; [| discriminate].
    injection H as <-.
    unfold ifold_sem in *; destruct (nv <? 0); [discriminate |].
    destruct (loop_refine (fun (a : T1 * T2) (s : T2) => snd a = s) G
                (fun s => Some (fun i => b1 i s)) (indices nv) (x0, x1) x1 eq_refl)
      with (v := p) as (w & Hw & Hr).
    + intros [s1 s2] t i s' Hst _ Hstep; subst G; simpl in *; subst.
      destruct (b0 i (s1, t)); [| discriminate].
      destruct (b1 i t) as [y |]; [| discriminate].
      injection Hstep as <-; exists y; split; reflexivity.
    + exact E.
    + rewrite Hw, Hr; reflexivity.
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
