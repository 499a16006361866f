"""Training of the trained variants: losses (LongCE, LSM regulariser, masked CE), ``lch train`` recipes
(:mod:`harness.train.run`), adapter merging (:mod:`harness.train.merge`) and the compressor trainer."""

from harness.train.losses import longce_loss, lsm_regularized_loss, masked_nll, token_nll

__all__ = ["longce_loss", "lsm_regularized_loss", "masked_nll", "token_nll"]
