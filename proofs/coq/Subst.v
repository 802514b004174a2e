(* The `subst` rules (rewrite-rules/subst.rules): explicit substitution: a `let` pushed through each construct.
   One theorem `<rule>_holds : <rule>` per rule stated in Statements.v. *)

From Fsmooth Require Import Semantics Statements.
From Coq Require Import ZArith List Lia.
Import ListNotations.
Open Scope Z_scope.

Theorem let_var_same_holds : let_var_same.
Proof. unfold let_var_same; by_cases. Qed.

Theorem let_var_other_holds : let_var_other.
Proof. unfold let_var_other; by_cases. Qed.

Theorem let_const_holds : let_const.
Proof. unfold let_const; by_cases. Qed.

Theorem let_lam_same_holds : let_lam_same.
Proof. unfold let_lam_same; by_cases. Qed.

Theorem let_lam_other_holds : let_lam_other.
Proof. unfold let_lam_other; by_cases. Qed.

Theorem let_lam_rename_holds : let_lam_rename.
Proof. unfold let_lam_rename; by_cases. Qed.

Theorem let_let_same_holds : let_let_same.
Proof. unfold let_let_same; by_cases. Qed.

Theorem let_let_other_holds : let_let_other.
Proof. unfold let_let_other; by_cases. Qed.

Theorem let_add_holds : let_add.
Proof. unfold let_add; by_cases. Qed.

Theorem let_sub_holds : let_sub.
Proof. unfold let_sub; by_cases. Qed.

Theorem let_mul_holds : let_mul.
Proof. unfold let_mul; by_cases. Qed.

Theorem let_div_holds : let_div.
Proof. unfold let_div; by_cases. Qed.

Theorem let_pow_holds : let_pow.
Proof. unfold let_pow; by_cases. Qed.

Theorem let_lt_holds : let_lt.
Proof. unfold let_lt; by_cases. Qed.

Theorem let_gt_holds : let_gt.
Proof. unfold let_gt; by_cases. Qed.

Theorem let_le_holds : let_le.
Proof. unfold let_le; by_cases. Qed.

Theorem let_ge_holds : let_ge.
Proof. unfold let_ge; by_cases. Qed.

Theorem let_eq_holds : let_eq.
Proof. unfold let_eq; by_cases. Qed.

Theorem let_ne_holds : let_ne.
Proof. unfold let_ne; by_cases. Qed.

Theorem let_get_holds : let_get.
Proof. unfold let_get; by_cases. Qed.

Theorem let_pair_holds : let_pair.
Proof. unfold let_pair; by_cases. Qed.

Theorem let_app_holds : let_app.
Proof. unfold let_app; by_cases. Qed.

Theorem let_neg_holds : let_neg.
Proof. unfold let_neg; by_cases. Qed.

Theorem let_not_holds : let_not.
Proof. unfold let_not; by_cases. Qed.

Theorem let_sin_holds : let_sin.
Proof. unfold let_sin; by_cases. Qed.

Theorem let_cos_holds : let_cos.
Proof. unfold let_cos; by_cases. Qed.

Theorem let_tan_holds : let_tan.
Proof. unfold let_tan; by_cases. Qed.

Theorem let_log_holds : let_log.
Proof. unfold let_log; by_cases. Qed.

Theorem let_exp_holds : let_exp.
Proof. unfold let_exp; by_cases. Qed.

Theorem let_sqrt_holds : let_sqrt.
Proof. unfold let_sqrt; by_cases. Qed.

Theorem let_to_double_holds : let_to_double.
Proof. unfold let_to_double; by_cases. Qed.

Theorem let_length_holds : let_length.
Proof. unfold let_length; by_cases. Qed.

Theorem let_fst_holds : let_fst.
Proof. unfold let_fst; by_cases. Qed.

Theorem let_snd_holds : let_snd.
Proof. unfold let_snd; by_cases. Qed.

Theorem let_concat_holds : let_concat.
Proof. unfold let_concat; by_cases. Qed.

Theorem let_if_holds : let_if.
Proof. unfold let_if; by_cases. Qed.

Theorem let_ifold_holds : let_ifold.
Proof. unfold let_ifold; by_cases. Qed.

Theorem let_iscan_holds : let_iscan.
Proof. unfold let_iscan; by_cases. Qed.

Theorem let_accum_holds : let_accum.
Proof. unfold let_accum; by_cases. Qed.

Theorem let_build_holds : let_build.
Proof. unfold let_build; by_cases. Qed.
